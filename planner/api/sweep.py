"""`POST /api/v1/sweep`: one plan per point of contexts × batch sizes × TP sizes.

Every point goes through `core.plan` with a fully validated `PlanRequest`, so a sweep point and
the same single `/plan` call agree. The grid is capped (`MAX_SWEEP_POINTS`); up to that many plans
is too long to hold the event loop, so the loop runs in a worker thread.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import Response

from planner.api.body import read_json_body
from planner.api.limits import big_sweep_slot
from planner.api.metrics import Metrics
from planner.api.openapi import json_body
from planner.api.plan import BODY_ERRORS, calibration_for
from planner.api.problems import ProblemException, problem_from_plan_error
from planner.api.schemas import SweepPoint, SweepRequest, SweepResponse
from planner.core.errors import PlanError
from planner.core.inputs import CalibrationLike
from planner.core.schema import Plan, PlanRequest
from planner.service import plan

# Sweeps this small (≈ 0.2 ms a point) run inline; larger ones in a worker thread.
INLINE_SWEEP_POINTS = 32

router = APIRouter(tags=["plan"])


def _point_request(base: dict[str, Any], context: int, batch: int, tp: int) -> PlanRequest:
    point = {
        **base,
        "requests": [{"context_tokens": context, "count": batch}],
        "context_tokens": context,
        "tensor_parallel_size": tp,
    }
    return PlanRequest.model_validate(point)


def _summary(context: int, batch: int, tp: int, result: Plan, include_plan: bool) -> SweepPoint:
    capacity, bounds = result.capacity, result.bounds
    return SweepPoint(
        context_tokens=context,
        batch_size=batch,
        tensor_parallel_size=tp,
        kv_bytes_per_token=result.kv_bytes_per_token,
        per_rank_kv_bytes=result.totals.per_rank_kv_bytes,
        paged_kv_bytes=result.totals.paged_kv_bytes,
        max_requests=capacity.max_requests if capacity else None,
        max_tokens=capacity.max_tokens if capacity else None,
        workload_fits=capacity.workload_fits if capacity else None,
        decode_step_seconds=bounds.decode_step_seconds if bounds else None,
        decode_tokens_per_s=bounds.decode_tokens_per_s if bounds else None,
        plan=result if include_plan else None,
    )


def run_sweep(
    sweep: SweepRequest, calibration: CalibrationLike | None
) -> tuple[SweepResponse, int]:
    """All points in grid order (contexts outermost), and how many planned."""
    base = sweep.base.model_dump(exclude_unset=True)
    tp_sizes = sweep.tensor_parallel_sizes or [sweep.base.tensor_parallel_size]
    points: list[SweepPoint] = []
    first_error: PlanError | None = None
    for context in sweep.context_tokens:
        for batch in sweep.batch_sizes:
            for tp in tp_sizes:
                try:
                    result = plan(_point_request(base, context, batch, tp), calibration=calibration)
                except PlanError as exc:
                    first_error = first_error or exc
                    points.append(
                        SweepPoint(
                            context_tokens=context,
                            batch_size=batch,
                            tensor_parallel_size=tp,
                            error=problem_from_plan_error(exc),
                        )
                    )
                    continue
                points.append(_summary(context, batch, tp, result, sweep.include_plans))
    failed = sum(1 for p in points if p.error is not None)
    if first_error is not None and failed == len(points):
        # Nothing planned: the base request itself is at fault; answer as /plan would.
        raise first_error
    return SweepResponse(points=points, failed_points=failed), len(points) - failed


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
    calibration = await calibration_for(sweep.base, http_request)
    points = (
        len(sweep.context_tokens)
        * len(sweep.batch_sizes)
        * len(sweep.tensor_parallel_sizes or [sweep.base.tensor_parallel_size])
    )
    try:
        # Big grids share a few slots per process (503 + Retry-After when all are taken).
        with big_sweep_slot(http_request.app, points):
            if points <= INLINE_SWEEP_POINTS:
                # A few milliseconds of CPU: cheaper on the event loop than a thread hop, and
                # no worker thread competing with the loop for the GIL under load.
                response, planned = run_sweep(sweep, calibration)
            else:
                response, planned = await anyio.to_thread.run_sync(
                    run_sweep, sweep, calibration
                )
    except PlanError:
        metrics.count_plan("unplannable", len(sweep.context_tokens) * len(sweep.batch_sizes))
        raise
    metrics.count_plan("ok", planned)
    metrics.count_plan("unplannable", response.failed_points)
    return Response(content=response.model_dump_json(), media_type="application/json")
