"""The CPU work behind each endpoint, as plain functions of validated inputs.

Each job runs either on the event loop (when its cost estimate is tiny) or in a worker process of
`planner.api.workers` (everything else), with the same result either way: an `Answer`, the status
and the JSON bytes to send. Core errors become problem+json here, inside the worker, so nothing
but bytes crosses the process boundary. No FastAPI is imported: workers load only what they run.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

from planner.api.schemas import SweepPoint, SweepRequest, SweepResponse
from planner.contract.problems import Problem, make_problem, problem_from_plan_error
from planner.core.errors import PlanError
from planner.core.inputs import CalibrationLike, Catalog
from planner.core.schema import Plan, PlanRequest
from planner.core.variants import Replanner
from planner.resolve import ResolvedModel
from planner.service import default_catalog, plan


@dataclass(frozen=True, slots=True)
class Answer:
    """What a job answers: `status` and `body` (JSON, or problem+json when `problem`)."""

    status: int
    body: bytes
    problem: bool = False
    planned: int = 0  # plans that succeeded (metrics)
    unplannable: int = 0  # plans a core error stopped (metrics)


def problem_answer(problem: Problem, *, unplannable: int = 0) -> Answer:
    return Answer(
        problem.status,
        problem.model_dump_json(exclude_none=True).encode(),
        problem=True,
        unplannable=unplannable,
    )


def too_big(size_bytes: int, limit_bytes: int) -> Answer:
    """The backstop behind the estimate: an answer over the limit is refused, not sent."""
    return problem_answer(
        make_problem(
            422,
            f"the answer is {size_bytes:,} bytes, over the limit of {limit_bytes:,} "
            "(KVPLAN_MAX_RESPONSE_BYTES); ask for fewer points or leave include_plans off",
            title="Answer too large",
            slug="response-too-large",
        )
    )


def catalog_for(model: object, revision: str | None, resolved: bytes | None) -> Catalog:
    """The default catalog, answering `model` with the model the server resolved (pickled by
    the server off its event loop, `planner.api.hub`), if any."""
    base = default_catalog()
    if resolved is None or not isinstance(model, str):
        return base
    from planner.resolve.core_catalog import ResolvingCatalog, WithResolved

    found = pickle.loads(resolved)  # noqa: S301 - made by this server, for this job
    assert isinstance(base, ResolvingCatalog) and isinstance(found, ResolvedModel)
    return WithResolved(base, model, revision, found)


def plan_job(
    request: PlanRequest,
    calibration: CalibrationLike | None,
    max_response_bytes: int,
    resolved: bytes | None = None,
) -> Answer:
    try:
        catalog = catalog_for(request.model, request.revision, resolved)
        result = plan(request, calibration=calibration, catalog=catalog)
    except PlanError as exc:
        return problem_answer(problem_from_plan_error(exc), unplannable=1)
    body = result.__pydantic_serializer__.to_json(result)  # model_dump_json's bytes, once
    if len(body) > max_response_bytes:
        return too_big(len(body), max_response_bytes)
    return Answer(200, body, planned=1)


# A sweep point sets these fields of `base`; a core error about one names the sweep's axis.
_AXIS_OF_FIELD = {
    "context_tokens": "context_tokens",
    "requests": "batch_sizes",
    "tensor_parallel_size": "tensor_parallel_sizes",
}


def _sweep_problem(exc: PlanError, sweep: SweepRequest) -> Problem:
    """A point's core error, located in the sweep request: under `base.`, or at the axis the
    point took the offending value from."""
    first = exc.problems[0].loc[0] if exc.problems and exc.problems[0].loc else None
    axis = _AXIS_OF_FIELD.get(first) if isinstance(first, str) else None
    if axis == "tensor_parallel_sizes" and sweep.tensor_parallel_sizes is None:
        axis = None  # the TP size came from base
    if axis is not None:
        problem = problem_from_plan_error(exc)
        errors = [e.model_copy(update={"loc": [axis], "field": axis}) for e in problem.errors]
        return problem.model_copy(update={"errors": errors})
    return problem_from_plan_error(exc, prefix=("base",))


def _point(context: int, batch: int, tp: int) -> dict[str, Any]:
    """One sweep point as changes to the base request."""
    return {
        "requests": [{"context_tokens": context, "count": batch}],
        "context_tokens": context,
        "tensor_parallel_size": tp,
    }


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


def sweep_job(
    sweep: SweepRequest,
    calibration: CalibrationLike | None,
    max_response_bytes: int,
    resolved: bytes | None = None,
) -> Answer:
    """All points in grid order (contexts outermost). When no point plans, the base request
    itself is at fault: answered as `/plan` would, with its fields under `base.`."""
    base = sweep.base.model_dump(exclude_unset=True)
    tp_sizes = sweep.tensor_parallel_sizes or [sweep.base.tensor_parallel_size]
    points: list[SweepPoint] = []
    first_error: Problem | None = None
    replan = Replanner(catalog_for(sweep.base.model, sweep.base.revision, resolved), calibration)
    for context in sweep.context_tokens:
        for batch in sweep.batch_sizes:
            for tp in tp_sizes:
                try:
                    result = replan(base, **_point(context, batch, tp))
                except PlanError as exc:
                    problem = _sweep_problem(exc, sweep)
                    first_error = first_error or problem
                    points.append(
                        SweepPoint(
                            context_tokens=context,
                            batch_size=batch,
                            tensor_parallel_size=tp,
                            error=problem,
                        )
                    )
                    continue
                points.append(_summary(context, batch, tp, result, sweep.include_plans))
    failed = sum(1 for p in points if p.error is not None)
    if first_error is not None and failed == len(points):
        return problem_answer(first_error, unplannable=failed)
    body = SweepResponse(points=points, failed_points=failed).model_dump_json().encode()
    if len(body) > max_response_bytes:
        return too_big(len(body), max_response_bytes)
    return Answer(200, body, planned=len(points) - failed, unplannable=failed)


def recommend_job(request: Any, resolved: bytes | None = None) -> Answer:
    from planner.service import recommend

    try:
        catalog = catalog_for(request.model, None, resolved)
        return Answer(200, recommend(request, catalog=catalog).model_dump_json().encode())
    except PlanError as exc:
        return problem_answer(problem_from_plan_error(exc))


def reconcile_job(request: Any) -> Answer:
    from planner.service import reconcile

    try:
        return Answer(200, reconcile(request).model_dump_json().encode())
    except PlanError as exc:
        return problem_answer(problem_from_plan_error(exc))


@dataclass(frozen=True, slots=True)
class CalibrationSnapshot:
    """The fields `plan()` reads from a stored calibration, as a plain value that crosses the
    process boundary whatever the store's record type is."""

    id: Any
    device_name: str
    measured_at: Any
    decode_bandwidth_bytes_per_s: float
    copy_bandwidth_bytes_per_s: float
    fixed_overhead_seconds: float
    per_layer_overhead_seconds: float | None = None
    matmul_flops_per_s: float | None = None

    @classmethod
    def of(cls, found: CalibrationLike) -> CalibrationSnapshot:
        return cls(
            found.id,
            found.device_name,
            found.measured_at,
            found.decode_bandwidth_bytes_per_s,
            found.copy_bandwidth_bytes_per_s,
            found.fixed_overhead_seconds,
            found.per_layer_overhead_seconds,
            found.matmul_flops_per_s,
        )


@dataclass(frozen=True, slots=True)
class CarriedPlanError:
    """A core error sent back from a worker: exceptions with their own `__init__` do not
    survive pickling, so the class, detail and problems travel and `rebuild` restores it."""

    cls: type[PlanError]
    detail: str
    problems: tuple[Any, ...]
    suggestions: tuple[str, ...] = ()  # an unknown id's "did you mean"
    message: Any = None  # the detail's code and params (planner.core.errors.Message)

    @classmethod
    def of(cls, exc: PlanError) -> CarriedPlanError:
        near = tuple(getattr(exc, "suggestions", ()))
        return cls(type(exc), exc.detail, tuple(exc.problems), near, exc.message)

    def rebuild(self) -> PlanError:
        exc = self.cls.__new__(self.cls)
        Exception.__init__(exc, self.detail)
        exc.detail = self.detail
        exc.problems = list(self.problems)
        if self.message is not None:
            exc.code, exc.params = self.message.code, dict(self.message.params)
        if self.suggestions:
            exc.suggestions = self.suggestions  # type: ignore[attr-defined]
        return exc


def reconcile_result_job(request: Any) -> Any:
    """The page's reconciliation: the result itself, or its core error carried back."""
    from planner.service import reconcile

    try:
        return reconcile(request)
    except PlanError as exc:
        return CarriedPlanError.of(exc)


def warm_up() -> int:
    """Run once in each new worker: loads the catalog and the planner's caches."""
    from planner import catalog

    return len(catalog.list_models())


__all__ = [
    "Answer",
    "CalibrationSnapshot",
    "CarriedPlanError",
    "catalog_for",
    "plan_job",
    "problem_answer",
    "recommend_job",
    "reconcile_job",
    "sweep_job",
    "too_big",
    "warm_up",
]
