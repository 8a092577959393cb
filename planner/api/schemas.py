"""Wire models the API adds around the core contract: problems and sweeps.

The problem model is `planner.contract.problems` (re-exported here). Plain Pydantic, no
FastAPI, so `planner.client` can import them without the server stack.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.contract.problems import PROBLEM_MEDIA_TYPE, Problem, ProblemError
from planner.core.errors import invalid
from planner.core.schema import MAX_COUNT, MAX_PARALLEL, MAX_TOKENS, Plan, PlanRequest

# A sweep runs one plan per grid point; 256 points keep the worst request well under a second.
MAX_SWEEP_POINTS = 256
MAX_SWEEP_AXIS = 64


class _StrictIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


_Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS, strict=True)]
_Count = Annotated[int, Field(ge=1, le=MAX_COUNT, strict=True)]
_Parallel = Annotated[int, Field(ge=1, le=MAX_PARALLEL, strict=True)]


class SweepRequest(_StrictIn):
    """A plan at every point of contexts × batch sizes × TP sizes, all else from `base`.

    Each point replaces `base`'s `requests` with `batch_size` requests of `context_tokens`, and
    its `context_tokens` and `tensor_parallel_size` with the point's.
    """

    base: PlanRequest
    context_tokens: Annotated[list[_Tokens], Field(min_length=1, max_length=MAX_SWEEP_AXIS)]
    batch_sizes: Annotated[list[_Count], Field(min_length=1, max_length=MAX_SWEEP_AXIS)] = Field(
        default_factory=lambda: [1]
    )
    tensor_parallel_sizes: (
        Annotated[list[_Parallel], Field(min_length=1, max_length=MAX_SWEEP_AXIS)] | None
    ) = Field(default=None, description="Default: `base.tensor_parallel_size`.")
    include_plans: bool = Field(default=False, description="Attach the full plan to each point.")

    @model_validator(mode="after")
    def _bounded_grid(self) -> SweepRequest:
        points = (
            len(self.context_tokens)
            * len(self.batch_sizes)
            * len(self.tensor_parallel_sizes or [self.base.tensor_parallel_size])
        )
        if points > MAX_SWEEP_POINTS:
            raise invalid("request.sweep_too_many_points", points=points, most=MAX_SWEEP_POINTS)
        return self


class SweepPoint(BaseModel):
    """One grid point: the figures charts need, or the problem that stopped its plan."""

    model_config = ConfigDict(frozen=True)

    context_tokens: int
    batch_size: int
    tensor_parallel_size: int
    kv_bytes_per_token: int | None = None
    per_rank_kv_bytes: int | None = None
    paged_kv_bytes: int | None = None
    max_requests: int | None = None
    max_tokens: int | None = None
    workload_fits: bool | None = None
    decode_step_seconds: float | None = None
    decode_tokens_per_s: float | None = None
    plan: Plan | None = None
    error: Problem | None = None


class SweepResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    points: list[SweepPoint]
    failed_points: int


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    status: Literal["ready"] = "ready"
    checks: dict[str, str] = Field(description="Each dependency and its state.")


__all__ = [
    "MAX_SWEEP_AXIS",
    "MAX_SWEEP_POINTS",
    "PROBLEM_MEDIA_TYPE",
    "Health",
    "Problem",
    "ProblemError",
    "Readiness",
    "SweepPoint",
    "SweepRequest",
    "SweepResponse",
]
