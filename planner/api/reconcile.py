"""`POST /api/v1/reconcile`: an engine's start-up log beside kvplan's recomputation of it.

Body `{log, model?, engine?, settings?}` → `core.reconcile` → `ReconcileResult`. The log is
untrusted text: bounded (the body limit answers 413 first; `log` over 2 MiB is a 422), parsed
with linear-time matching, never executed, and echoed back only as matched figures.
"""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import Response

from planner.api.body import read_json_body
from planner.api.openapi import json_body
from planner.api.plan import BODY_ERRORS
from planner.core.reconcile_schema import ReconcileRequest, ReconcileResult
from planner.service import reconcile

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
    # Parsing up to 2 MiB of text is milliseconds, but off the event loop all the same.
    result: ReconcileResult = await anyio.to_thread.run_sync(reconcile, request)
    return Response(content=result.model_dump_json(), media_type="application/json")
