"""The core's `Catalog` over `resolve_model`: bundled ids and aliases, local directories and
the Hub, each turned into the core's `ResolvedModel` (shape, weights, where they came from).

The front ends hand `ResolvingCatalog(settings)` to `plan()` / `recommend()` / `reconcile()`
in place of the bundled-only catalog; the core stays free of I/O.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from planner.core.hardware import Gpu
from planner.core.inputs import ResolvedModel as CoreModel
from planner.core.inputs import model_from_config
from planner.core.notes import note
from planner.resolve import ResolvedModel, resolve_model

if TYPE_CHECKING:
    from planner.resolve.settings import HubSettings


def as_core_model(r: ResolvedModel) -> CoreModel:
    """A resolved model as the core sizes it. Weights unknown to the resolver (a pasted config,
    a repo without safetensors) are counted from the config: MoE-true, quantization as stored;
    an unsized quantization leaves them unknown rather than guessed."""
    notes = [note("model.catalog_note", text=text) for text in r.notes]
    if r.weights_bytes is not None and r.weights_source == "safetensors":
        notes.append(note("model.hub_weights", source=r.source, weights=r.weights_bytes))
    return model_from_config(
        dict(r.config),
        r.id,
        num_parameters=r.num_parameters,
        weights_bytes=r.weights_bytes,
        weights_source=r.weights_source,
        notes=tuple(notes),
    )


class ResolvingCatalog:
    """`planner.core.inputs.Catalog` that resolves ids the way people type them."""

    def __init__(
        self, settings: HubSettings | None = None, *, allow_local_dirs: bool | None = None
    ) -> None:
        # Without settings, the Hub's (KVPLAN_HUB_*, HF_*) are read when first needed.
        self._settings = settings
        self._local = allow_local_dirs
        # Sizing a config (shape, parameter and weight counts) costs more than planning with
        # it: keep what was built, bounded like the resolver's own cache.
        self._built: OrderedDict[tuple[str, str | None], CoreModel] = OrderedDict()
        self._limit = settings.cache_entries if settings is not None else 512

    def model(self, model_id: str, revision: str | None = None) -> CoreModel:
        key = (model_id, revision)
        found = self._built.get(key)
        if found is not None:
            self._built.move_to_end(key)
            return found
        resolved = resolve_model(
            model_id, revision=revision, settings=self._settings, allow_local_dirs=self._local
        )
        built = as_core_model(resolved)
        if self._limit:
            self._built[key] = built
            while len(self._built) > self._limit:
                self._built.popitem(last=False)
        return built

    def gpu(self, gpu_id: str) -> Gpu:
        from planner.catalog import get_gpu

        e = get_gpu(gpu_id)
        return Gpu(
            e.id,
            e.name,
            e.usable_memory_bytes,
            e.bandwidth_bytes_per_s,
            e.bf16_dense_flops,
            e.compute_capability,
            fp8_dense_flops=e.fp8_dense_flops,
            link_bandwidth_bytes_per_s=e.link_bandwidth_bytes_per_s,
            link_latency_seconds=e.link_latency_seconds,
            link_name=e.link,
        )


__all__ = ["ResolvingCatalog", "as_core_model"]
