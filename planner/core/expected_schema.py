"""The expected decode step in the plan contract (`bounds.expected`, used by `answer`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Param = str | int | float | bool | None

TermCode = Literal[
    "weights_read",
    "kv_read",
    "matmul",
    "attention",
    "all_reduce",
    "pipeline_handoff",
    "per_layer",
    "per_step",
    "draft_steps",
]


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class StepTermOut(_Out):
    """One term of the expected step, in seconds; `params` name its quantities and constants
    with their units. A memory term hidden under a longer compute side (or the other way
    round) has `counted` false: the step is max(memory, compute) + the rest."""

    code: TermCode
    seconds: float
    group: Literal["memory", "compute", "communication", "fixed"]
    counted: bool
    measured: bool  # its constant comes from the calibration, not the fitted catalog default
    params: dict[str, Param]


class ExpectedOut(_Out):
    """The expected decode step for the workload's batch at its context, from fitted constants
    (never below the floor, `bounds.decode_step_seconds`, which comes from physics alone)."""

    decode_step_seconds: float
    tpot_seconds: float  # per request per accepted token (speculative: step / tokens per step)
    decode_tokens_per_s: float  # the whole batch
    batch_requests: int
    dominant: Literal["memory", "compute"]
    terms: list[StepTermOut]
    constants_source: str  # "catalog" or the calibration id
    measured_terms: list[str]  # codes whose constants a calibration measured
    tokens_per_step: float | None = None  # speculative: mean tokens per request per step
    acceptance_rate: float | None = None


__all__ = ["ExpectedOut", "StepTermOut", "TermCode"]
