"""The shells' way in: the bundled catalog handed to the pure core, and `plan()` over it.

The API, CLI and page call `planner.service.plan`; the core itself never imports the catalog.
"""

from __future__ import annotations

from functools import lru_cache

from planner.core import schema as s
from planner.core.hardware import Gpu
from planner.core.inputs import CalibrationLike, Catalog, ResolvedModel
from planner.core.model import shape_from_config
from planner.core.notes import note
from planner.core.plan import plan as core_plan
from planner.core.recommend_schema import Recommendation, RecommendRequest
from planner.core.reconcile_schema import ReconcileRequest, ReconcileResult


class BundledCatalog:
    """The catalog shipped with kvplan (planner/catalog), as the core's `Catalog`."""

    def model(self, model_id: str, revision: str | None = None) -> ResolvedModel:
        return _catalog_model(model_id)

    def gpu(self, gpu_id: str) -> Gpu:
        return _catalog_gpu(gpu_id)


@lru_cache(maxsize=512)
def _catalog_model(model_id: str) -> ResolvedModel:
    from planner.catalog import get_model

    entry = get_model(model_id)
    shape = shape_from_config(entry.config, model_id=entry.id, num_parameters=entry.num_parameters)
    if entry.weights_bytes is not None:
        source, weights = "safetensors", entry.weights_bytes
    else:
        source, weights = "parameter_count", entry.resolved_weights_bytes
    notes = tuple(note("model.catalog_note", text=text) for text in entry.notes)
    return ResolvedModel(shape, entry.num_parameters, weights, source, notes, entry.config)


@lru_cache(maxsize=256)
def _catalog_gpu(gpu_id: str) -> Gpu:
    from planner.catalog import get_gpu

    e = get_gpu(gpu_id)
    return Gpu(e.id, e.name, e.usable_memory_bytes, e.bandwidth_bytes_per_s, e.bf16_dense_flops)


_DEFAULT = BundledCatalog()


def default_catalog() -> Catalog:
    return _DEFAULT


def plan(request: s.PlanRequest, *, calibration: CalibrationLike | None = None) -> s.Plan:
    """Plan one request against the bundled catalog."""
    return core_plan(request, catalog=default_catalog(), calibration=calibration)


def recommend(request: RecommendRequest) -> Recommendation:
    """Recommend flags against the bundled catalog."""
    from planner.core.recommend import recommend as core_recommend

    return core_recommend(request, catalog=default_catalog())


def reconcile(request: ReconcileRequest) -> ReconcileResult:
    """Reconcile a log against the bundled catalog."""
    from planner.core.reconcile import reconcile as core_reconcile

    return core_reconcile(request, catalog=default_catalog())


__all__ = ["BundledCatalog", "default_catalog", "plan", "recommend", "reconcile"]
