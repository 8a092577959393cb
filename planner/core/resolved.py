"""The model and the GPU a request names, as the catalog handed in resolves them.

The core never imports the catalog or the Hub: the front ends pass a `Catalog` (see
`planner.service`) that turns ids into `ResolvedModel` and `Gpu` objects; a pasted config.json
becomes one here.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from planner.core import schema as s
from planner.core.draft_weights import draft_weight_bytes
from planner.core.engines import Engine
from planner.core.errors import FieldError, ModelConfigError, UnknownIdError
from planner.core.hardware import Gpu
from planner.core.memo import IdentityMemo
from planner.core.model import ModelShape, shape_from_config
from planner.core.notes import Note, note
from planner.core.params import parameter_counts
from planner.core.quant import WeightBytes, weight_bytes
from planner.core.speculative import Speculation, draft_shape_of, resolve_speculation
from planner.core.speculative_schema import SpeculativeConfig
from planner.core.units import KVDtype


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    """A model as the planner sizes it: its shape, and its weights where known."""

    shape: ModelShape
    num_parameters: int | None = None
    weights_bytes: int | None = None
    weights_source: str | None = None  # "safetensors" | "parameter_count" | "request"
    notes: tuple[Note, ...] = ()
    config: Mapping[str, Any] | None = None  # the config.json it came from, when known
    active_parameters: int | None = None  # per token (MoE: the experts a token uses)
    prefill_parameters: int | None = None  # active, less the indexed input embedding
    weight_split: WeightBytes | None = None  # dense part and per-expert bytes, as stored


class Catalog(Protocol):
    """What the core needs from a model/GPU catalog (data and I/O live outside the core)."""

    def model(self, model_id: str, revision: str | None) -> ResolvedModel: ...

    def gpu(self, gpu_id: str) -> Gpu: ...


def resolve_model_of(request: s.PlanRequest, catalog: Catalog) -> ResolvedModel:
    if isinstance(request.model, str):
        return catalog.model(request.model, request.revision)
    return pasted_model(request.model)


# A pasted config asked again (a sweep, an admission loop, a test grid) is counted once: keyed by
# its canonical JSON, so equal configs share one frozen model, and the memos keyed by a model's
# identity serve them too. Bounded by count and by the key's size (a wide config is counted
# afresh rather than kept): at most 64 × 32 KiB of keys plus the configs they pin.
_PASTED: IdentityMemo[ResolvedModel] = IdentityMemo(64)
_PASTED_KEY_CHARS = 32 << 10


def pasted_model(config: Mapping[str, Any]) -> ResolvedModel:
    """`model_from_config(config)`, shared by every config equal to it in JSON."""
    try:
        key = json.dumps(config, sort_keys=True)
    except (TypeError, ValueError):  # not JSON (a caller's own objects): nothing to share by
        return model_from_config(config)
    if len(key) > _PASTED_KEY_CHARS:
        return model_from_config(config)
    hit = _PASTED.get((), key)
    return hit if hit is not None else _PASTED.put((), key, model_from_config(config))


def model_from_config(
    config: Mapping[str, Any],
    model_id: str | None = None,
    *,
    num_parameters: int | None = None,
    weights_bytes: int | None = None,
    weights_source: str | None = None,
    notes: tuple[Note, ...] = (),
) -> ResolvedModel:
    """A model from its config.json: its shape, and its parameters and weights counted from
    the config (every routed expert once, quantized layers as stored) unless given."""
    counts = split = None
    with contextlib.suppress(ModelConfigError):
        counts = parameter_counts(config)
    with contextlib.suppress(ModelConfigError):
        split = weight_bytes(config)
    params = num_parameters or (counts.total if counts is not None else None)
    shape = shape_from_config(config, model_id=model_id, num_parameters=params)
    out_notes = list(notes)
    if weights_bytes is None and split is not None:
        weights_bytes, weights_source = split.total, "parameter_count"
        out_notes.append(note("model.weights_counted", weights=split.total))
    if split is not None and weights_bytes is not None and weights_bytes != split.total:
        split = split.scaled_to(weights_bytes)
    return ResolvedModel(
        shape=shape,
        num_parameters=params,
        weights_bytes=weights_bytes,
        weights_source=weights_source if weights_bytes is not None else None,
        notes=tuple(out_notes),
        config=config,
        active_parameters=counts.active_per_token if counts is not None else None,
        prefill_parameters=counts.active_without_embedding_lookup if counts else None,
        weight_split=split,
    )


# Element bytes of the dtypes a model is stored or served in (unquantized tensors).
_ELEMENT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def served_model(model: ResolvedModel, model_dtype: str) -> tuple[ResolvedModel, list[Note]]:
    """The model's weights in the dtype the engine serves it in (`Engine.model_dtype`): a float32
    checkpoint held in 16 bits takes half its stored bytes, a 16-bit one upcast to float32 twice;
    quantized tensors stay as stored. The one place stored weight bytes become served ones."""
    stored = _ELEMENT_BYTES.get(model.shape.dtype, 2)
    served = _ELEMENT_BYTES.get(model_dtype, 2)
    if stored == served or model.weights_bytes is None:
        return model, []
    split = None
    if model.config is not None:
        with contextlib.suppress(ModelConfigError):
            split = weight_bytes(model.config, served), weight_bytes(model.config)
    if split is not None and split[1].total > 0:
        weights = round(model.weights_bytes * split[0].total / split[1].total)
        served_split: WeightBytes | None = split[0].scaled_to(weights)
    elif model.shape.quant_method is None:
        weights = model.weights_bytes * served // stored
        served_split = model.weight_split.scaled_to(weights) if model.weight_split else None
    else:
        return model, []  # quantized, and its config cannot be counted: as stored
    return replace(model, weights_bytes=weights, weight_split=served_split), [
        note(
            "weights.served_dtype",
            stored=model.weights_bytes,
            stored_dtype=model.shape.dtype,
            dtype=model_dtype,
            weights=weights,
        )
    ]


def resolve_gpu(g: str | s.GpuSpec | None, catalog: Catalog) -> Gpu | None:
    """The GPU a request's `gpu` names: a catalog id, or a custom GPU object."""
    if g is None:
        return None
    if isinstance(g, s.GpuSpec):
        return Gpu.custom(g)
    return catalog.gpu(g)


def resolve_draft(
    spec: SpeculativeConfig,
    engine: Engine,
    model: ResolvedModel,
    catalog: Catalog,
    tp: int,
    kv: KVDtype,
    model_dtype: str | None = None,
) -> tuple[Speculation, list[Note]]:
    """The speculative config resolved: the draft from the catalog or its pasted config, its
    weights in the target's served dtype (`model_dtype`; vLLM builds the draft's ModelConfig
    with `dtype=self.target_model_config.dtype`, config/speculative.py)."""
    if not engine.speculative_drafts:
        raise FieldError(
            "speculative_config",
            "input.speculative_not_vllm",
            label=engine.label,
        )
    notes: list[Note] = []
    dtype = model_dtype or engine.model_dtype(model.shape, None)[0]
    draft_shape = None
    draft_weights: int | None = None
    target_config = model.config
    if spec.method != "ngram" and spec.model is not None:
        if isinstance(spec.model, str):
            try:
                draft = catalog.model(spec.model, None)
            except FieldError as exc:
                raise UnknownIdError.at(("speculative_config", "model"), exc.problems[0]) from None
            draft_shape, draft_weights = draft.shape, served_model(draft, dtype)[0].weights_bytes
            if spec.method == "mtp":
                target_config = draft.config
        elif spec.method == "mtp":
            target_config = spec.model
        else:
            draft_shape = draft_shape_of(spec.model)  # errors named under speculative_config
            draft_weights = draft_weight_bytes(
                spec.model, spec.method, model.config, _ELEMENT_BYTES.get(dtype, 2)
            )
            if draft_weights is not None:
                notes.append(note("speculative.draft_weights_estimated", weights=draft_weights))
    if draft_shape is not None:
        try:
            engine.validate_parallel(draft_shape, tp, 1)
        except FieldError as exc:
            at, reason = ("speculative_config", "model"), exc.problems[0].message
            raise FieldError(at, "input.draft_reason", reason=reason) from None
    sp = resolve_speculation(spec, model.shape, target_config, draft_shape, draft_weights, tp)
    sp = engine.speculation(sp)  # the release's own draft rules
    if sp.method == "mtp" and model.weights_bytes is not None:
        # The MTP module is part of the checkpoint: about one decoder layer's share of it.
        sp = replace(
            sp,
            draft_weights_bytes=model.weights_bytes
            * len(sp.draft_layers)
            // max(1, model.shape.num_hidden_layers),
        )
    if sp.draft_layers:
        notes.append(
            note(
                "speculative.draft_layers",
                method=sp.method,
                k=sp.num_speculative_tokens,
                draft_layers=len(sp.draft_layers),
                draft_bytes=sp.draft_bytes_per_token(kv),
            )
        )
    else:
        notes.append(note("speculative.ngram", k=sp.num_speculative_tokens))
    notes.append(
        note(
            "speculative.lookahead",
            reserved=sp.reserved_tokens,
            k=sp.num_speculative_tokens,
            lookahead=sp.lookahead_tokens,
        )
    )
    if sp.extra_retained_tokens and (
        model.shape.has_window or any(x.is_window for x in sp.draft_layers)
    ):
        notes.append(note("speculative.extra_retained", extra=sp.extra_retained_tokens))
    if sp.draft_layers and sp.draft_weights_bytes is None:
        notes.append(note("speculative.draft_weights_unknown"))
    return sp, notes


__all__ = [
    "Catalog",
    "ResolvedModel",
    "model_from_config",
    "pasted_model",
    "resolve_draft",
    "resolve_gpu",
    "resolve_model_of",
    "served_model",
]
