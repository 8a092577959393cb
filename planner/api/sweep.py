"""`POST /api/v1/sweep`: one plan per point of contexts × batch sizes × TP sizes.

Every point goes through `core.plan` with a fully validated `PlanRequest`, so a sweep point and
the same single `/plan` call agree. The grid is capped (`MAX_SWEEP_POINTS`) and its cost is
estimated before any work (`planner.cost`: points × the base's shape, and the answer's size with
`include_plans`); admitted sweeps run in the worker pool under its deadline, a tiny one inline.
Core errors name their field in the sweep request: `base.…`, or the axis a point took it from.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from planner.api.body import read_json_body
from planner.api.hub import lookups_of
from planner.api.jobs import sweep_job
from planner.api.limits import big_sweep_slot
from planner.api.metrics import Metrics
from planner.api.openapi import json_body
from planner.api.plan import BODY_ERRORS, calibration_for
from planner.api.problems import ProblemException
from planner.api.schemas import SweepRequest, SweepResponse
from planner.api.work import admit, answer_response, run_job
from planner.contract.problems import problem_from_plan_error
from planner.core.errors import PlanError
from planner.cost import needs_hub, sweep_cost

router = APIRouter(tags=["plan"])


def grid_points(sweep: SweepRequest) -> int:
    return (
        len(sweep.context_tokens)
        * len(sweep.batch_sizes)
        * len(sweep.tensor_parallel_sizes or [sweep.base.tensor_parallel_size])
    )


@router.post(
    "/sweep",
    operation_id="sweep",
    summary="Plan over a grid of context lengths × batch sizes × TP sizes",
    response_model=SweepResponse,
    responses=BODY_ERRORS,
    openapi_extra=json_body("SweepRequest"),
)
async def post_sweep(http_request: Request) -> Response:
    metrics: Metrics = http_request.app.state.metrics
    try:
        sweep = await read_json_body(http_request, SweepRequest)
    except ProblemException:
        metrics.count_plan("invalid")
        raise
    points = grid_points(sweep)
    base = sweep.base
    try:
        resolved = await lookups_of(http_request.app).resolve(base.model, base.revision)
    except PlanError as exc:  # located under `base.`, as the points' errors are
        metrics.count_plan("unplannable")
        raise ProblemException(problem_from_plan_error(exc, prefix=("base",))) from None
    known = resolved.layers if resolved is not None else None
    cost = sweep_cost(base, points, include_plans=sweep.include_plans, known=known)
    budget = admit(http_request.app, cost)
    calibration = await calibration_for(sweep.base, http_request)
    # Big grids share a few slots per process (503 + Retry-After when all are taken).
    with big_sweep_slot(http_request.app, points):
        result = await run_job(
            http_request,
            cost,
            sweep_job,
            sweep,
            calibration,
            budget.max_response_bytes,
            resolved.blob if resolved is not None else None,
            inline=False if needs_hub(base) or resolved is not None else None,
        )
    metrics.count_plan("ok", result.planned)
    metrics.count_plan("unplannable", result.unplannable)
    return answer_response(result)
