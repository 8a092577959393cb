"""Admission and dispatch: every CPU-heavy endpoint goes through `run_job`.

1. The request's cost is estimated from its shape (`planner.cost`); over budget → 422 naming the
   limit and its setting, before any work.
2. A tiny estimate (≤ KVPLAN_INLINE_COST work units, about the cost of a process hop) runs on
   the event loop: bounded by the estimate, and faster than any hand-off.
3. Everything else runs in the app's worker pool (`planner.api.workers`) under
   KVPLAN_WORK_DEADLINE_SECONDS: at the deadline the worker is killed (503); a full queue is 503
   with `Retry-After` at once. A client that goes away meanwhile has its job killed the same
   way (counted as a disconnect).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from planner.api.jobs import Answer
from planner.api.workers import PoolBusy, WorkerDied, WorkerPool, WorkTimeout
from planner.contract.problems import ProblemError, ProblemException, make_problem
from planner.cost import Budget, Cost

logger = logging.getLogger("planner.work")

T = TypeVar("T")

DEFAULT_BUDGET = Budget(
    max_work_units=2_000_000, max_response_bytes=8 << 20, inline_work_units=2_000
)


def budget_of(app: Any) -> Budget:
    budget: Budget | None = getattr(app.state, "budget", None)
    if budget is None:
        settings = getattr(app.state, "settings", None)
        if settings is None:
            return DEFAULT_BUDGET
        budget = Budget(
            max_work_units=settings.max_request_cost,
            max_response_bytes=settings.max_response_bytes,
            inline_work_units=settings.inline_cost,
        )
        app.state.budget = budget
    return budget


def new_pool(settings: Any) -> WorkerPool:
    return WorkerPool(
        settings.workers,
        max_waiting=settings.work_queue,
        max_rss_bytes=settings.worker_max_rss_bytes,
        memory_bytes=settings.worker_memory_bytes or None,
    )


def pool_of(app: Any) -> WorkerPool:
    """The app's pool (started by the lifespan; built here on first use otherwise)."""
    pool: WorkerPool | None = getattr(app.state, "work_pool", None)
    if pool is None:
        pool = app.state.work_pool = new_pool(app.state.settings)
    return pool


def admit(app: Any, cost: Cost, field: str = "body") -> Budget:
    """422 when `cost` is over budget; the budget otherwise."""
    budget = budget_of(app)
    reason = budget.refusal(cost)
    if reason is not None:
        metrics = getattr(app.state, "metrics", None)
        if metrics is not None:
            metrics.count_refused("cost")
        raise ProblemException(
            make_problem(
                422,
                reason,
                title="Request too expensive",
                slug="too-expensive",
                errors=[ProblemError(loc=[field], field=field, msg=reason)],
            )
        )
    return budget


def _busy(detail: str) -> ProblemException:
    return ProblemException(
        make_problem(503, detail, title="Server busy", slug="busy"), headers={"Retry-After": "1"}
    )


async def run_job(
    request: Request, cost: Cost, fn: Callable[..., T], *args: Any, inline: bool | None = None
) -> T:
    """`fn(*args)` inline or in the pool, per the estimate (admission already passed);
    `inline=False` always uses the pool."""
    app = request.app
    budget = budget_of(app)
    if inline is not False and budget.inline(cost):
        return fn(*args)
    settings = app.state.settings
    deadline = float(settings.work_deadline_seconds)
    metrics = getattr(app.state, "metrics", None)
    try:
        return await _unless_disconnected(request, pool_of(app).run(deadline, fn, *args))
    except PoolBusy:
        if metrics is not None:
            metrics.count_refused("busy")
        raise _busy(
            f"all {settings.workers} workers are busy and {settings.work_queue} jobs are waiting; "
            "retry in 1 s (the limits are KVPLAN_WORKERS and KVPLAN_WORK_QUEUE)"
        ) from None
    except WorkTimeout:
        if metrics is not None:
            metrics.count_refused("deadline")
        raise _busy(
            f"the work took longer than {deadline:g} s and was stopped "
            "(KVPLAN_WORK_DEADLINE_SECONDS); ask for less work"
        ) from None
    except (WorkerDied, MemoryError) as exc:
        if metrics is not None:
            metrics.count_refused("worker")
        logger.warning(f"worker failed: {type(exc).__name__}: {exc}")
        raise _busy(
            "the worker ran out of memory or exited (KVPLAN_WORKER_MEMORY_BYTES); ask for less work"
        ) from None


async def _unless_disconnected(request: Request, job: Awaitable[T]) -> T:
    """`job`, cancelled (and its worker killed) when the client goes away meanwhile; the
    request then ends as a disconnect (`ClientDisconnect`: logged and counted, no answer)."""
    gone = False
    result: list[T] = []

    async def watch(scope: anyio.CancelScope) -> None:
        nonlocal gone
        # The body is read: the next message is the client leaving (or the response ending).
        while (await request.receive())["type"] != "http.disconnect":
            pass
        gone = True
        scope.cancel()

    failed: list[Exception] = []

    async def work(scope: anyio.CancelScope) -> None:
        try:
            result.append(await job)
        except Exception as exc:  # raised below, outside the task group (no ExceptionGroup)
            failed.append(exc)
        scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch, tg.cancel_scope)
        tg.start_soon(work, tg.cancel_scope)
    if failed:
        raise failed[0]
    if gone and not result:
        raise ClientDisconnect
    return result[0]


def answer_response(answer: Answer) -> Response:
    media = "application/problem+json" if answer.problem else "application/json"
    return Response(content=answer.body, status_code=answer.status, media_type=media)


__all__ = ["admit", "answer_response", "budget_of", "new_pool", "pool_of", "run_job"]
