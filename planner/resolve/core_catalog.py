"""The core's `Catalog` over `resolve_model`: bundled ids and aliases, local directories and
the Hub, each turned into the core's `ResolvedModel` (shape, weights, where they came from).

The front ends hand `ResolvingCatalog(settings)` to `plan()` / `recommend()` / `reconcile()`
in place of the bundled-only catalog; the core stays free of I/O.
"""

from __future__ import annotations

from planner.core.errors import ModelConfigError
from planner.core.hardware import Gpu
from planner.core.inputs import ResolvedModel as CoreModel
from planner.core.model import shape_from_config
from planner.core.notes import Note, note
from planner.core.params import parameter_counts, weight_bytes
from planner.resolve import ResolvedModel, resolve_model
from planner.resolve.settings import HubSettings


def as_core_model(r: ResolvedModel) -> CoreModel:
    """A resolved model as the core sizes it. Weights unknown to the resolver (a pasted config,
    a repo without safetensors) are counted from the config: MoE-true, quantization as stored;
    an unsized quantization leaves them unknown rather than guessed."""
    config = dict(r.config)
    try:
        counts = parameter_counts(config)
    except ModelConfigError:
        counts = None
    num_parameters = r.num_parameters or (counts.total if counts is not None else None)
    shape = shape_from_config(config, model_id=r.id, num_parameters=num_parameters)
    notes: list[Note] = [note("model.catalog_note", text=text) for text in r.notes]
    weights, source = r.weights_bytes, r.weights_source
    if weights is None:
        try:
            weights = weight_bytes(config).total
        except ModelConfigError as exc:
            notes.append(note("model.catalog_note", text=exc.detail))
        else:
            source = "parameter_count"
            notes.append(
                note(
                    "model.catalog_note",
                    text=f"Weights counted from the config: {weights:,} B (every routed expert "
                    "once, quantized layers as stored).",
                )
            )
    elif source == "safetensors":
        notes.append(note("model.catalog_weights", weights=weights))
    return CoreModel(shape, num_parameters, weights, source, tuple(notes), config)


class ResolvingCatalog:
    """`planner.core.inputs.Catalog` that resolves ids the way people type them."""

    def __init__(self, settings: HubSettings | None = None) -> None:
        self._settings = settings

    def model(self, model_id: str, revision: str | None = None) -> CoreModel:
        return as_core_model(resolve_model(model_id, revision=revision, settings=self._settings))

    def gpu(self, gpu_id: str) -> Gpu:
        from planner.catalog import get_gpu

        e = get_gpu(gpu_id)
        return Gpu(e.id, e.name, e.usable_memory_bytes, e.bandwidth_bytes_per_s, e.bf16_dense_flops)


__all__ = ["ResolvingCatalog", "as_core_model"]
