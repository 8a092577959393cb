"""`POST /api/v1/plan`: the contract. Body → `PlanRequest` → `core.plan` → `Plan`.

The response is `Plan.model_dump_json()` verbatim, the same bytes `kvplan plan --request` prints.
The request's cost is estimated from its shape first (`planner.cost`): over budget is a 422; a
typical plan (tens of microseconds) runs on the event loop, where a hand-off would cost more than
the plan; anything heavier runs in the worker pool under a deadline (`planner.api.work`).
"""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import Response

from planner.api.body import is_json_media_type, read_json_body
from planner.api.hub import lookups_of
from planner.api.jobs import CalibrationSnapshot, plan_job
from planner.api.metrics import Metrics
from planner.api.openapi import json_body
from planner.api.plan_cache import DEFAULT_MAX_BYTES, PlanCache
from planner.api.problems import ProblemException, problem_responses
from planner.api.work import admit, answer_response, run_job
from planner.core.errors import PlanError, UnknownIdError
from planner.core.inputs import CalibrationLike
from planner.core.schema import Plan, PlanRequest
from planner.cost import needs_hub, plan_cost

router = APIRouter(tags=["plan"])

BODY_ERRORS = problem_responses(400, 413, 415, 422)


async def calibration_for(request: PlanRequest, http_request: Request) -> CalibrationLike | None:
    """The stored calibration named by `calibration_id`, looked up off the event loop."""
    if request.calibration_id is None:
        return None
    store = getattr(http_request.app.state, "store", None)
    if store is None:
        raise UnknownIdError(("calibration_id",), "api.no_calibration_store")
    # `Store.get` returns None for an unknown id; `plan()` then names `calibration_id`.
    found: CalibrationLike | None = await anyio.to_thread.run_sync(
        store.get, request.calibration_id
    )
    # A plain value: the plan may run in a worker process.
    return CalibrationSnapshot.of(found) if found is not None else None


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
        'Example: `{"model": "meta-llama/Llama-3.1-8B", "context_tokens": 8192, '
        '"kv_budget_bytes": 51539607552}` answers `capacity.max_requests` 47 (vLLM\'s log '
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
        settings = getattr(http_request.app.state, "settings", None)
        max_bytes = getattr(settings, "plan_cache_bytes", DEFAULT_MAX_BYTES)
        cache = http_request.app.state.plan_cache = PlanCache(max_bytes=max_bytes)
    if is_json_media_type(http_request.headers.get("content-type")):
        answer = cache.get(await http_request.body())
        if answer is not None:
            metrics.count_plan("ok")
            return Response(content=answer, media_type="application/json")
    try:
        request = await read_json_body(http_request, PlanRequest)
    except ProblemException:
        metrics.count_plan("invalid")
        raise
    # A Hub id is resolved first (off the loop): its own layers price it, and the worker
    # plans with what was resolved.
    try:
        resolved = await lookups_of(http_request.app).resolve(request.model, request.revision)
    except PlanError:
        metrics.count_plan("unplannable")
        raise
    cost = plan_cost(request, resolved.layers if resolved is not None else None)
    budget = admit(http_request.app, cost)
    calibration = await calibration_for(request, http_request)
    result = await run_job(
        http_request,
        cost,
        plan_job,
        request,
        calibration,
        budget.max_response_bytes,
        resolved.blob if resolved is not None else None,
        inline=False if needs_hub(request) or resolved is not None else None,
    )
    if result.status != 200:
        metrics.count_plan("unplannable")
        return answer_response(result)
    metrics.count_plan("ok")
    if request.calibration_id is None:
        cache.put(await http_request.body(), result.body)
    return answer_response(result)


__all__ = ["BODY_ERRORS", "Plan", "calibration_for", "router"]
