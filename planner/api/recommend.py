"""`POST /api/v1/recommend`: engine settings and launch flags that hold a workload.

Body `RecommendRequest` → `core.recommend` → `Recommendation`. An impossible target is a 200
with `feasible: false`, the binding constraint and the nearest fits: it is an answer, not an
error. The search plans a few dozen candidates, so it runs off the event loop.
"""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import Response

from planner.api.body import read_json_body
from planner.api.openapi import json_body
from planner.api.plan import BODY_ERRORS
from planner.core.recommend_schema import Recommendation, RecommendRequest
from planner.service import recommend

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
    result: Recommendation = await anyio.to_thread.run_sync(recommend, request)
    return Response(content=result.model_dump_json(), media_type="application/json")
