"""`POST /api/v1/recommend`: engine settings and launch flags that hold a workload.

Body `RecommendRequest` → `core.recommend` → `Recommendation`. An impossible target is a 200
with `feasible: false`, the binding constraint and the nearest fits: it is an answer, not an
error. The search plans dozens of candidates: its cost is estimated first (`planner.cost`;
over budget is a 422) and it runs in the worker pool under the work deadline.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from planner.api.body import read_json_body
from planner.api.hub import lookups_of
from planner.api.jobs import recommend_job
from planner.api.openapi import json_body
from planner.api.plan import BODY_ERRORS
from planner.api.work import admit, answer_response, run_job
from planner.core.recommend_schema import Recommendation, RecommendRequest
from planner.cost import recommend_cost

router = APIRouter(tags=["recommend"])


@router.post(
    "/recommend",
    operation_id="recommend",
    summary="Recommend engine settings and flags for a workload",
    response_model=Recommendation,
    responses=BODY_ERRORS,
    openapi_extra=json_body("RecommendRequest"),
)
async def post_recommend(http_request: Request) -> Response:
    request = await read_json_body(http_request, RecommendRequest)
    # A Hub id is resolved first, off the loop: its own layers price the search.
    resolved = await lookups_of(http_request.app).resolve(request.model, None)
    dtypes = 1 if request.kv_cache_dtype or not request.allow_fp8_kv else 2
    cost = recommend_cost(
        request.model,
        gpu_count=request.gpu_count,
        mix_classes=len(request.context_mix or ()) or 1,
        dtypes=dtypes,
        known=resolved.layers if resolved is not None else None,
    )
    admit(http_request.app, cost)
    blob = resolved.blob if resolved is not None else None
    return answer_response(await run_job(http_request, cost, recommend_job, request, blob))


__all__ = ["Recommendation", "router"]
