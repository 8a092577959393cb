"""The measurement loop shared by the CPU and CUDA backends: warm-up, samples, passes, budget.

A backend hands over `Case`s whose `time_calls(n)` runs n back-to-back calls and returns the
elapsed seconds (perf_counter on CPU, CUDA events on GPU, a fake clock in tests). The loop picks n
so that one sample is long enough to time, runs the whole set of sizes several times in shuffled
order (drift between passes shows clock or thermal changes), and stops at the deadline.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from planner.probe.fit import TimedPoint

TimeCalls = Callable[[int], float]
Clock = Callable[[], float]


class Deadline:
    """A time budget; `sub` carves a share of what is left for one phase."""

    def __init__(self, seconds: float, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._end = clock() + max(0.0, seconds)

    def remaining(self) -> float:
        return max(0.0, self._end - self._clock())

    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def sub(self, fraction: float) -> Deadline:
        return Deadline(self.remaining() * fraction, self._clock)


@dataclass(frozen=True, slots=True)
class SweepConfig:
    passes: int = 3
    # One sample must be long enough that timer resolution and launch jitter do not matter.
    min_sample_seconds: float = 1e-3
    min_samples: int = 3
    max_samples: int = 30
    warmup_seconds: float = 0.025
    min_warmup_calls: int = 5
    max_calls_per_sample: int = 100_000


@dataclass(slots=True)
class Case:
    kind: Literal["read", "copy", "decode"]
    bytes: int
    working_set_bytes: int
    time_calls: TimeCalls
    batch: int | None = None
    context_tokens: int | None = None
    # Filled by the sweep.
    calls_per_sample: int = 0
    estimate_seconds: float = 0.0
    per_call_seconds: list[float] = field(default_factory=list)
    pass_medians: list[float] = field(default_factory=list)

    def summary(self) -> TimedPoint:
        med = statistics.median(self.per_call_seconds)
        mean = statistics.fmean(self.per_call_seconds)
        cv = statistics.pstdev(self.per_call_seconds) / mean if mean > 0 else 0.0
        spread = (
            (max(self.pass_medians) - min(self.pass_medians)) / med
            if len(self.pass_medians) > 1 and med > 0
            else 0.0
        )
        return TimedPoint(
            bytes=self.bytes,
            seconds=med,
            coefficient_of_variation=cv,
            pass_spread=spread,
            working_set_bytes=self.working_set_bytes,
            seconds_best=min(self.per_call_seconds),
        )


def _spent(n: int) -> float:
    raise RuntimeError("this case's buffers were released after its sweep")


def release(cases: Sequence[Case]) -> None:
    """Drop the kernels (and through them the buffers) once measured; the results stay."""
    for case in cases:
        case.time_calls = _spent


def _prepare(case: Case, config: SweepConfig) -> None:
    """Warm up and size one sample: time one call, then repeat until warm."""
    estimate = max(case.time_calls(1), 1e-9)
    case.estimate_seconds = estimate
    n = math.ceil(config.min_sample_seconds / estimate)
    case.calls_per_sample = max(1, min(config.max_calls_per_sample, n))
    warm_seconds = estimate
    warm_calls = 1
    while warm_seconds < config.warmup_seconds or warm_calls < config.min_warmup_calls:
        warm_seconds += case.time_calls(case.calls_per_sample)
        warm_calls += case.calls_per_sample


def sweep(
    cases: Sequence[Case],
    config: SweepConfig,
    deadline: Deadline,
    *,
    rng: random.Random | None = None,
) -> bool:
    """Measure every case, `config.passes` times in shuffled order. True if cut short.

    A case is kept (has samples) once its first pass completed; later passes are skipped when
    the deadline nears, so a short budget gives fewer, not broken, points.
    """
    rng = rng or random.Random(0)
    truncated = False
    slots_left = len(cases) * config.passes
    for pass_index in range(config.passes):
        order = list(cases)
        rng.shuffle(order)
        for case in order:
            if deadline.expired():
                return True
            if pass_index == 0:
                _prepare(case, config)
            elif not case.per_call_seconds:
                slots_left -= 1
                continue  # never measured in pass 0: do not start it late
            else:
                case.time_calls(case.calls_per_sample)  # re-warm after the other sizes ran
            per_call = case.pass_medians[-1] if case.pass_medians else case.estimate_seconds
            sample_seconds = max(per_call * case.calls_per_sample, config.min_sample_seconds)
            budget = deadline.remaining() / max(1, slots_left)
            n_samples = int(budget / sample_seconds)
            n_samples = max(config.min_samples, min(config.max_samples, n_samples))
            this_pass: list[float] = []
            for _ in range(n_samples):
                if this_pass and deadline.expired():
                    truncated = True
                    break
                elapsed = case.time_calls(case.calls_per_sample)
                this_pass.append(elapsed / case.calls_per_sample)
            case.per_call_seconds.extend(this_pass)
            case.pass_medians.append(statistics.median(this_pass))
            slots_left -= 1
    return truncated
