"""`POST /api/v1/plan`: the contract. Body → `PlanRequest` → `core.plan` → `Plan`.

The response is `Plan.model_dump_json()` verbatim, the same bytes `kvplan plan --request` prints.
The handler is `async def`: a plan is microseconds to a millisecond of pure CPU, and a thread hop
would cost more than it (research B.4).
"""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import Response

from planner.api.body import _is_json_media_type, read_json_body
from planner.api.metrics import Metrics
from planner.api.openapi import json_body
from planner.api.plan_cache import PlanCache
from planner.api.problems import ProblemException, problem_responses
from planner.core.errors import PlanError, UnknownIdError
from planner.core.inputs import CalibrationLike
from planner.core.schema import Plan, PlanRequest
from planner.service import plan

router = APIRouter(tags=["plan"])

BODY_ERRORS = problem_responses(400, 413, 415, 422)


async def calibration_for(request: PlanRequest, http_request: Request) -> CalibrationLike | None:
    """The stored calibration named by `calibration_id`, looked up off the event loop."""
    if request.calibration_id is None:
        return None
    store = getattr(http_request.app.state, "store", None)
    if store is None:
        raise UnknownIdError(
            ("calibration_id",), "no calibration store is open on this server; omit the field"
        )
    # `Store.get` returns None for an unknown id; `plan()` then names `calibration_id`.
    found: CalibrationLike | None = await anyio.to_thread.run_sync(
        store.get, request.calibration_id
    )
    return found


@router.post(
    "/plan",
    operation_id="plan",
    summary="Plan the KV cache of one model on one GPU under one engine",
    description=(
        "How many requests of `context_tokens` fit, by the engine's own allocator rules, with "
        "the arithmetic. Only `model` is required: a catalog id (`GET /api/v1/models`) or a "
        "Hugging Face config.json object. The memory comes from `kv_budget_bytes` (the KV "
        "cache per GPU, in bytes) or from `gpu` (a catalog id or a `GpuSpec`) less weights and "
        "reserve; without either, `capacity` is null. `bounds` (the decode-step floor) needs "
        "a `gpu`, `bandwidth_bytes_per_s` or `calibration_id`. `context_tokens` is the length "
        "asked about (default: the longest in `requests`, else the model's maximum); "
        "`requests` (`context_tokens` × `count` entries) is a workload checked against the "
        "pool in `capacity.workload_fits`.\n\n"
        "Example: `{\"model\": \"meta-llama/Llama-3.1-8B\", \"context_tokens\": 8192, "
        "\"kv_budget_bytes\": 51539607552}` answers `capacity.max_requests` 47 (vLLM's log "
        "says 48.00x: block 0 is reserved)."
    ),
    response_model=Plan,
    responses=BODY_ERRORS,
    openapi_extra=json_body("PlanRequest"),
)
async def post_plan(http_request: Request) -> Response:
    metrics: Metrics = http_request.app.state.metrics
    cache: PlanCache | None = getattr(http_request.app.state, "plan_cache", None)
    if cache is None:
        cache = http_request.app.state.plan_cache = PlanCache()
    if _is_json_media_type(http_request.headers.get("content-type")):
        answer = cache.get(await http_request.body())
        if answer is not None:
            metrics.count_plan("ok")
            return Response(content=answer, media_type="application/json")
    try:
        request = await read_json_body(http_request, PlanRequest)
    except ProblemException:
        metrics.count_plan("invalid")
        raise
    try:
        result = plan(request, calibration=await calibration_for(request, http_request))
    except PlanError:
        metrics.count_plan("unplannable")
        raise
    metrics.count_plan("ok")
    answer = result.model_dump_json().encode()
    if request.calibration_id is None:
        cache.put(await http_request.body(), answer)
    return Response(content=answer, media_type="application/json")
