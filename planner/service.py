"""The shells' way in: the catalog (bundled models, then the Hub) handed to the pure core.

The API, CLI and page call `planner.service.plan`; the core itself never imports the catalog.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from planner.core import schema as s
from planner.core.inputs import CalibrationLike, Catalog
from planner.core.plan import plan as core_plan

if TYPE_CHECKING:  # loaded by the commands that use them
    from planner.core.recommend_schema import Recommendation, RecommendRequest
    from planner.core.reconcile_schema import ReconcileRequest, ReconcileResult


@lru_cache(maxsize=2)
def default_catalog(*, allow_local_dirs: bool = False) -> Catalog:
    """The catalog the shells hand to the core: bundled ids and the spellings people type,
    then the Hugging Face Hub (KVPLAN_HUB_*, HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, HF_HOME),
    built once. Local directories as model ids only where the caller's files are the user's
    own (the CLI), never for the server."""
    from planner.resolve.core_catalog import ResolvingCatalog

    return ResolvingCatalog(allow_local_dirs=allow_local_dirs)


def plan(
    request: s.PlanRequest,
    *,
    calibration: CalibrationLike | None = None,
    catalog: Catalog | None = None,
) -> s.Plan:
    """Plan one request against the default catalog (or the one given)."""
    return core_plan(request, catalog=catalog or default_catalog(), calibration=calibration)


def recommend(request: RecommendRequest, *, catalog: Catalog | None = None) -> Recommendation:
    """Recommend flags against the default catalog (or the one given)."""
    from planner.core.recommend import recommend as core_recommend

    return core_recommend(request, catalog=catalog or default_catalog())


def reconcile(request: ReconcileRequest) -> ReconcileResult:
    """Reconcile a log against the bundled catalog."""
    from planner.core.reconcile import reconcile as core_reconcile

    return core_reconcile(request, catalog=default_catalog())


__all__ = ["default_catalog", "plan", "recommend", "reconcile"]
