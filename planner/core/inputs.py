"""Resolve once: a PlanRequest, the catalog handed in, and a calibration become one frozen
`Inputs` object that every later step of `plan()` reads (and nothing re-decides).

The core never imports the catalog or the Hub: the front ends pass a `Catalog` (see
`planner.service`) that turns ids into `ResolvedModel` and `Gpu` objects.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from planner.core import schema as s
from planner.core.calibration import CalibrationLike
from planner.core.context_limit import long_context_refusal
from planner.core.draft_weights import draft_weight_bytes
from planner.core.engines import Engine, Scheduling, get_engine
from planner.core.errors import FieldError, ModelConfigError, UnknownIdError
from planner.core.hardware import Gpu
from planner.core.model import ModelShape, shape_from_config, with_windows
from planner.core.notes import Note, note
from planner.core.params import parameter_counts
from planner.core.prefix import one_prefix, prefix_reusers
from planner.core.quant import WeightBytes, weight_bytes
from planner.core.sharing import layer_form_notes
from planner.core.specs import WindowPolicy
from planner.core.speculative import (
    Speculation,
    apply_speculation,
    draft_shape_of,
    resolve_speculation,
)
from planner.core.speculative_schema import SpeculativeConfig
from planner.core.units import KVDtype, kv_dtype


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


@dataclass(frozen=True, slots=True)
class Inputs:
    """Everything `plan()` decides before it computes, resolved once."""

    request: s.PlanRequest
    engine: Engine
    model: ResolvedModel
    shape: ModelShape  # the model's shape, with explicit windows applied
    gpu: Gpu | None
    model_dtype: str
    kv_dtype: KVDtype
    block_size: int
    sched: Scheduling
    policy: WindowPolicy
    tp: int
    pp: int
    context_tokens: int
    max_model_len: int | None
    mixes: tuple[s.RequestMix, ...]
    shared_prefix_tokens: tuple[int, ...]  # per mix: prefix tokens the engine stores once
    prefix_reusers: tuple[int, ...]  # per mix: requests reusing a prefix held (prefix.py)
    prefix_caching: bool
    weights_bytes: int | None  # whole model
    calibration: CalibrationLike | None
    notes: tuple[Note, ...]
    speculation: Speculation | None = None

    @property
    def workload_given(self) -> bool:
        return bool(self.request.requests)


def resolve_model_of(request: s.PlanRequest, catalog: Catalog) -> ResolvedModel:
    if isinstance(request.model, str):
        return catalog.model(request.model, request.revision)
    return model_from_config(request.model)


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


def resolve_gpu(request: s.PlanRequest, catalog: Catalog) -> Gpu | None:
    g = request.gpu
    if g is None:
        return None
    if isinstance(g, s.GpuSpec):
        return Gpu.custom(g)
    return catalog.gpu(g)


def _context(request: s.PlanRequest, max_model_len: int | None) -> int:
    if request.context_tokens is not None:
        return request.context_tokens
    if request.requests:
        return max(r.context_tokens for r in request.requests)
    if max_model_len is not None:
        return min(max_model_len, s.MAX_TOKENS)
    raise FieldError(
        "context_tokens",
        "input.context_needed",
    )


def _kv_dtype(
    request: s.PlanRequest, shape: ModelShape, model_dtype: str
) -> tuple[KVDtype, list[Note]]:
    if request.kv_cache_dtype.strip().lower() != "auto":
        return kv_dtype(request.kv_cache_dtype), []
    notes: list[Note] = []
    if not shape.dtype_from_config and request.dtype in (None, "auto"):
        notes.append(note("dtype.auto_assumed_bf16"))
    return kv_dtype(model_dtype), notes


def _shared_prefix(prefix: int, block: int, engine: Engine, enabled: bool) -> int:
    """Tokens of a shared prefix the engine stores once (block engines: whole blocks only)."""
    if not enabled or engine.prefix_granularity == "none":
        return 0
    if engine.prefix_granularity == "block":
        return prefix // block * block
    return prefix


def _prefix_notes(engine: Engine, enabled: bool, block: int) -> Note:
    if engine.prefix_granularity == "none":
        return note("prefix.none")
    if not enabled:
        return note("prefix.off")
    if engine.prefix_granularity == "block":
        return note("prefix.blocks", engine=engine.label, block=block)
    return note("prefix.tokens", engine=engine.label)


def resolve(
    request: s.PlanRequest, catalog: Catalog, calibration: CalibrationLike | None = None
) -> Inputs:
    """The request resolved against its engine, model, GPU and calibration. Raises
    `PlanError` subclasses naming the offending field."""
    engine = get_engine(request.engine, request.engine_version).for_request(request)
    model = resolve_model_of(request, catalog)
    shape = model.shape
    notes: list[Note] = list(model.notes)
    tp, pp = request.tensor_parallel_size, request.pipeline_parallel_size
    model_dtype, dtype_notes = engine.model_dtype(shape, request.dtype)
    kv, more = _kv_dtype(request, shape, model_dtype)
    dtype_notes += more
    explicit_kv = request.kv_cache_dtype.strip().lower() != "auto"
    max_len = engine.max_model_len(shape)
    if (asked_len := request.context_length) is not None:
        max_len = engine.context_length(shape, asked_len, request.allow_long_max_model_len)
    ctx = _context(request, max_len)
    too_long = long_context_refusal(request, engine.label, engine.long_context_override, ctx,
                                    max_len)  # fmt: skip
    try:
        engine.validate(shape, tp, pp, kv, model_dtype, explicit_kv)
    except FieldError as exc:
        # vLLM's ModelConfig checks max_model_len after the model dtype, before the rest.
        dtype_first = isinstance(exc, ModelConfigError) or exc.problems[0].field == "dtype"
        if too_long is None or not engine.context_checked_early or dtype_first:
            raise
    if too_long is not None and engine.context_checked_early:
        raise too_long
    shape = engine.bind_layers(shape, kv, model_dtype)  # the draft copies these layers too
    model = replace(model, shape=shape)
    notes.extend(layer_form_notes(shape))
    speculation = None
    if request.speculative_config is not None:
        speculation, more = resolve_draft(
            request.speculative_config, engine, model, catalog, tp, kv
        )
        notes.extend(more)
        shape = apply_speculation(shape, speculation)
    gpu = resolve_gpu(request, catalog)
    if gpu is not None:
        engine.check_gpu(shape, gpu)
    if request.calibration_id is not None and (
        calibration is None or str(calibration.id) != request.calibration_id
    ):
        raise UnknownIdError(
            "calibration_id",
            "input.unknown_calibration",
            calibration_id=request.calibration_id,
        )
    notes.extend(engine.rule_notes())
    notes.extend(dtype_notes)
    if kv.note_code:
        notes.append(note(kv.note_code))

    if request.async_scheduling is not None and not engine.takes_async_scheduling:
        raise FieldError("async_scheduling", "input.async_scheduling_not_vllm", label=engine.label)
    prefix_on = (
        request.enable_prefix_caching
        if request.enable_prefix_caching is not None
        else engine.prefix_caching_default
    )
    block, block_notes = engine.block_size(request.block_size, shape, kv)
    notes.extend(block_notes)
    block, page_notes = engine.page_on_gpu(block, request.block_size, shape, gpu)
    notes.extend(page_notes)
    if shape.has_state:  # sized once dtype, TP and cache mode are known (vLLM raises the block)
        prefix_on = engine.state_prefix_caching(request.enable_prefix_caching)
        shape, block, state_notes = engine.bind_state(
            shape, block_size=block, kv=kv, model_dtype=model_dtype, tp=tp, pp=pp,
            prefix_caching=prefix_on, max_model_len=ctx,
            num_spec=speculation.num_speculative_tokens if speculation is not None else 0,
        )  # fmt: skip
        notes.extend(state_notes)
    sched = engine.scheduling(
        request.max_num_batched_tokens, request.async_scheduling, gpu, pp, shape,
        speculation.method if speculation is not None else None,
    )  # fmt: skip
    if speculation is not None and speculation.reserved_tokens:
        sched = replace(sched, reserved_tokens=speculation.reserved_tokens)

    explicit_windows = request.max_attention_window is not None
    if explicit_windows:
        if not engine.takes_max_attention_window:
            raise FieldError(
                "max_attention_window", "input.max_attention_window_not_trtllm", label=engine.label
            )
        # The list (repeated over the layers) decides which layers keep a cyclic window;
        # max_seq_len is the longest request planned here.
        assert request.max_attention_window is not None
        longest_planned = max(
            [request.context_tokens or 0] + [m.context_tokens for m in request.requests or []]
        )
        shape = with_windows(
            shape,
            request.max_attention_window,
            longest_planned or shape.max_position_embeddings or s.MAX_TOKENS,
        )
    policy = engine.window_policy(
        shape, hybrid_manager=request.hybrid_kv_cache_manager, explicit_windows=explicit_windows
    )
    if shape.has_window:
        notes.extend(engine.window_notes(policy, sched, shape, request.hybrid_kv_cache_manager))

    if too_long is not None:
        raise too_long
    if max_len and ctx > max_len:
        notes.append(note("context.beyond_max_position", ctx=ctx, max_len=max_len))
    mixes = tuple(request.requests or [s.RequestMix(context_tokens=ctx)])
    mixes, across = one_prefix(mixes, request.shared_prefix_tokens)
    shared = tuple(_shared_prefix(m.prefix_tokens, block, engine, prefix_on) for m in mixes)
    if any(m.prefix_tokens for m in mixes):
        notes.append(_prefix_notes(engine, prefix_on, block))
    weights = request.weights_bytes if request.weights_bytes is not None else model.weights_bytes
    return Inputs(
        request=request,
        engine=engine,
        model=model,
        shape=shape,
        gpu=gpu,
        model_dtype=model_dtype,
        kv_dtype=kv,
        block_size=block,
        sched=sched,
        policy=policy,
        tp=tp,
        pp=pp,
        context_tokens=ctx,
        max_model_len=max_len,
        mixes=mixes,
        shared_prefix_tokens=shared,
        prefix_reusers=prefix_reusers(mixes, shared, across=across),
        prefix_caching=prefix_on,
        weights_bytes=weights,
        calibration=calibration,
        notes=tuple(notes),
        speculation=speculation,
    )


def resolve_draft(
    spec: SpeculativeConfig,
    engine: Engine,
    model: ResolvedModel,
    catalog: Catalog,
    tp: int,
    kv: KVDtype,
) -> tuple[Speculation, list[Note]]:
    """The speculative config resolved: the draft from the catalog or its pasted config."""
    if not engine.speculative_drafts:
        raise FieldError(
            "speculative_config",
            "input.speculative_not_vllm",
            label=engine.label,
        )
    notes: list[Note] = []
    draft_shape = None
    draft_weights: int | None = None
    target_config = model.config
    if spec.method != "ngram" and spec.model is not None:
        if isinstance(spec.model, str):
            try:
                draft = catalog.model(spec.model, None)
            except FieldError as exc:
                raise UnknownIdError.at(("speculative_config", "model"), exc.problems[0]) from None
            draft_shape, draft_weights = draft.shape, draft.weights_bytes
            if spec.method == "mtp":
                target_config = draft.config
        elif spec.method == "mtp":
            target_config = spec.model
        else:
            draft_shape = draft_shape_of(spec.model)  # errors named under speculative_config
            draft_weights = draft_weight_bytes(spec.model, spec.method, model.config)
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
    "CalibrationLike",
    "Catalog",
    "Inputs",
    "ResolvedModel",
    "model_from_config",
    "resolve",
    "resolve_draft",
    "resolve_gpu",
]
