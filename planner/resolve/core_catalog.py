"""The core's `Catalog` over `resolve_model`: bundled ids and aliases, local directories and
the Hub, each turned into the core's `ResolvedModel` (shape, weights, where they came from).

The front ends hand `ResolvingCatalog(settings)` to `plan()` / `recommend()` / `reconcile()`
in place of the bundled-only catalog; the core stays free of I/O.
"""

from __future__ import annotations

import json
import threading
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

    # Typed spellings remembered per catalog (each a short string and a key).
    TYPED_LIMIT = 4096

    def __init__(
        self, settings: HubSettings | None = None, *, allow_local_dirs: bool | None = None
    ) -> None:
        # Without settings, the Hub's (KVPLAN_HUB_*, HF_*) are read when first needed.
        self._settings = settings
        self._local = allow_local_dirs
        # Sizing a config (shape, parameter and weight counts) costs more than planning with
        # it: keep what was built, one entry per model (however its id was typed), bounded in
        # entries and in config bytes like the resolver's own cache.
        self._built: OrderedDict[_Key, tuple[CoreModel, int]] = OrderedDict()
        self._built_bytes = 0
        self._typed: OrderedDict[tuple[str, str | None], _Key] = OrderedDict()
        self._limit = settings.cache_entries if settings is not None else 512
        self._max_bytes = settings.memory_cache_bytes if settings is not None else 64 << 20
        self._lock = threading.Lock()

    def model(self, model_id: str, revision: str | None = None) -> CoreModel:
        typed = (model_id, revision)
        with self._lock:
            key = self._typed.get(typed)
            hit = self._built.get(key) if key is not None else None
            if hit is not None and key is not None:
                self._built.move_to_end(key)
                return hit[0]
        resolved = resolve_model(
            model_id, revision=revision, settings=self._settings, allow_local_dirs=self._local
        )
        built = self.build(resolved)
        if resolved.source in ("catalog", "hub"):  # a local directory may change on disk
            with self._lock:
                self._typed[typed] = _key_of(resolved)
                while len(self._typed) > self.TYPED_LIMIT:
                    self._typed.popitem(last=False)
        return built

    def build(self, resolved: ResolvedModel) -> CoreModel:
        """The core's model of `resolved`, built once per model and revision."""
        key = _key_of(resolved)
        cacheable = resolved.source in ("catalog", "hub")
        if cacheable:
            with self._lock:
                hit = self._built.get(key)
                if hit is not None:
                    self._built.move_to_end(key)
                    return hit[0]
        built = as_core_model(resolved)
        if cacheable and self._limit:
            size = _config_bytes(resolved.config) + 4096
            with self._lock:
                if size <= self._max_bytes:
                    old = self._built.pop(key, None)
                    self._built_bytes += size - (old[1] if old is not None else 0)
                    self._built[key] = (built, size)
                while self._built and (
                    len(self._built) > self._limit or self._built_bytes > self._max_bytes
                ):
                    _, (_, dropped) = self._built.popitem(last=False)
                    self._built_bytes -= dropped
        return built

    @property
    def built_bytes(self) -> int:
        return self._built_bytes

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


class WithResolved:
    """A catalog that answers one typed id with a model resolved elsewhere (the server's Hub
    lookup, passed to a worker) and asks `base` for everything else."""

    def __init__(
        self, base: ResolvingCatalog, typed: str, revision: str | None, resolved: ResolvedModel
    ) -> None:
        self._base = base
        self._typed = (typed, revision)
        self._resolved = resolved

    def model(self, model_id: str, revision: str | None = None) -> CoreModel:
        if (model_id, revision) == self._typed:
            return self._base.build(self._resolved)
        return self._base.model(model_id, revision)

    def gpu(self, gpu_id: str) -> Gpu:
        return self._base.gpu(gpu_id)


_Key = tuple[str, str | None, str | None]


def _key_of(r: ResolvedModel) -> _Key:
    return (r.source, (r.id or "").lower(), r.revision)


def _config_bytes(config: object) -> int:
    return len(json.dumps(config, separators=(",", ":"), default=str))


__all__ = ["ResolvingCatalog", "WithResolved", "as_core_model"]
