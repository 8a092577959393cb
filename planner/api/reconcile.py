"""`POST /api/v1/reconcile`: an engine's start-up log beside kvplan's recomputation of it.

Body `{log, model?, engine?, settings?}` → `core.reconcile` → `ReconcileResult`. The log is
untrusted text: bounded (the body limit answers 413 first; `log` over 2 MiB is a 422), parsed
with linear-time matching, never executed, and echoed back only as matched figures.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from planner.api.body import read_json_body
from planner.api.jobs import reconcile_job
from planner.api.openapi import json_body
from planner.api.plan import BODY_ERRORS
from planner.api.work import answer_response, run_job
from planner.core.reconcile_schema import ReconcileRequest, ReconcileResult
from planner.cost import Cost

router = APIRouter(tags=["reconcile"])


@router.post(
    "/reconcile",
    operation_id="reconcile",
    summary="Reconcile an engine's start-up log with kvplan's numbers",
    response_model=ReconcileResult,
    responses=BODY_ERRORS,
    openapi_extra=json_body("ReconcileRequest"),
)
async def post_reconcile(http_request: Request) -> Response:
    request = await read_json_body(http_request, ReconcileRequest)
    # Linear in the log (≤ 2 MiB) plus one plan: never inline, always under the work deadline.
    cost = Cost(work_units=len(request.log), response_bytes=0, plans=1)
    return answer_response(await run_job(http_request, cost, reconcile_job, request, inline=False))


__all__ = ["ReconcileResult", "router"]
