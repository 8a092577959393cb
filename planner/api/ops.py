"""Operations endpoints, unversioned: `/healthz`, `/readyz`, `/metrics`.

`/metrics` is a plain route, not a mounted ASGI app: a mount answers `GET /metrics` with a 307 to
`/metrics/`, which scrapers that do not follow redirects read as a failure.
"""

from __future__ import annotations

import time

import anyio
import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import Response

from planner import catalog, server
from planner.api.metrics import CONTENT_TYPE, Metrics
from planner.api.problems import ProblemException, make_problem, problem_responses
from planner.api.schemas import Health, ProblemError, Readiness
from planner.store import StoreError

router = APIRouter(tags=["ops"])

STORE_PING_TIMEOUT_SECONDS = 2.0
# After a failed write, /readyz fails this long (then lets the next write show the state).
WRITE_FAILURE_UNREADY_SECONDS = 30.0


@router.get("/healthz", operation_id="healthz", summary="Liveness: the process answers")
async def healthz() -> Health:
    return Health()


def _catalog_check() -> str | None:
    try:
        return None if catalog.ready() else "catalog is empty"
    except Exception as exc:  # any load failure means "not ready", with its reason
        return f"catalog failed to load: {type(exc).__name__}"


async def _store_check(request: Request) -> str | None:
    if not getattr(request.app.state, "store_required", False):
        return None
    store = getattr(request.app.state, "store", None)
    if store is None:
        return "calibration store is not open"
    failure = getattr(request.app.state, "write_failure", None)
    if failure is not None and time.monotonic() - failure[0] < WRITE_FAILURE_UNREADY_SECONDS:
        # A read answers on a full disk; the last write did not. Unready for a while, then
        # ready again so that a write can show whether the store recovered.
        return f"calibration store writes are failing: {failure[1]}"
    try:
        with anyio.fail_after(STORE_PING_TIMEOUT_SECONDS):
            await anyio.to_thread.run_sync(store.ping)
    except StoreError as exc:  # its message names the store (password-free) and the fix
        return f"calibration store unusable: {exc}"
    except Exception as exc:
        return f"calibration store unreachable: {type(exc).__name__}"
    return None


def _capacity_check(request: Request) -> str | None:
    """Saturated (the balancer should send new traffic elsewhere): connections near
    KVPLAN_MAX_CONNECTIONS, every in-flight slot taken, or every worker busy with a full queue."""
    limits = server.LIMITS
    if limits.saturated:
        return (
            f"{limits.open_connections} connections open, near the limit of "
            f"{limits.max_connections} (KVPLAN_MAX_CONNECTIONS)"
        )
    guard = getattr(request.app.state, "in_flight_guard", None)
    if guard is not None and guard.saturated:
        return f"{guard.in_flight} requests in flight, the limit (KVPLAN_MAX_CONCURRENT_REQUESTS)"
    pool = getattr(request.app.state, "work_pool", None)
    if pool is not None and pool.saturated:
        return "every worker is busy and the queue is full (KVPLAN_WORKERS, KVPLAN_WORK_QUEUE)"
    return None


@router.get(
    "/readyz",
    operation_id="readyz",
    summary="Readiness: catalog loaded, calibration store reachable and writable, not saturated",
    responses=problem_responses(503),
)
async def readyz(request: Request) -> Readiness:
    failures = {
        name: reason
        for name, reason in (
            ("catalog", _catalog_check()),
            ("store", await _store_check(request)),
            ("capacity", _capacity_check(request)),
        )
        if reason is not None
    }
    if failures:
        raise ProblemException(
            make_problem(
                503,
                "; ".join(f"{k}: {v}" for k, v in failures.items()),
                title="Not ready",
                slug="not-ready",
                errors=[
                    ProblemError(loc=["checks", k], field=f"checks.{k}", msg=v)
                    for k, v in failures.items()
                ],
            ),
            headers={"Retry-After": "5"},
        )
    checks = {
        "catalog": "ok",
        "store": "ok" if request.app.state.store_required else "absent",
        "capacity": "ok",
    }
    return Readiness(checks=checks)


@router.get(
    "/metrics",
    operation_id="metrics",
    summary="Prometheus metrics (text exposition format)",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics(request: Request) -> Response:
    registry: Metrics = request.app.state.metrics
    return Response(content=registry.exposition(), media_type=CONTENT_TYPE)
