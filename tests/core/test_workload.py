"""Concurrency of a length mix: the closed forms against a seeded simulation of admission.

The simulation is the definition: draw request lengths i.i.d. from the mix, admit them while
their blocks fit in the pool, count how many were admitted. The closed forms must agree with it
within sampling error (mean) and within a point of probability (tail).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.core.workload import MAX_EXACT_WORK, mix_capacity

TRIALS = 20_000


def simulate(usable: int, needs: list[int], shares: list[float], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    width = usable // min(needs) + 2  # more draws than can ever fit
    table = np.asarray(needs, dtype=np.int64)
    chunks = []
    for _ in range(TRIALS // 1000):  # 1,000 trials at a time keeps memory small
        draws = rng.choice(len(needs), size=(1000, width), p=shares)
        chunks.append((table[draws].cumsum(axis=1) <= usable).sum(axis=1))
    admitted: np.ndarray = np.concatenate(chunks)
    return admitted


# vLLM blocks of 16 tokens: 2k -> 128, 8k -> 512, 32k -> 2,048 blocks (cdiv(ctx, 16)).
CASES = [
    # the mix, 70% 2k / 20% 8k / 10% 32k, in Llama-3.1-8B's 40 GiB pool (20,479 usable)
    (20_479, [128, 512, 2048], [0.7, 0.2, 0.1]),
    # lengths that are not block multiples: 3,000 -> 188 blocks, 9,000 -> 563
    (30_000, [188, 563], [0.5, 0.5]),
    # small pool, few requests: the discrete tail matters
    (5_000, [1_000, 1_800, 2_600], [0.2, 0.5, 0.3]),
    # token pool (SGLang page 1): big and coprime lengths -> normal approximation
    (2_000_000, [2_049, 8_193, 32_769], [0.7, 0.2, 0.1]),
]


@pytest.mark.parametrize(("usable", "needs", "shares"), CASES)
def test_closed_form_matches_simulation(usable: int, needs: list[int], shares: list[float]) -> None:
    cap = mix_capacity(usable, needs, shares, quantile=0.95)
    admitted = simulate(usable, needs, shares, seed=20260101)
    standard_error = admitted.std() / math.sqrt(TRIALS)
    assert abs(cap.expected_concurrency - admitted.mean()) < 4 * standard_error + 0.02
    # The tail: n requests fit >= 95% of the time, n + 1 do not (up to sampling error).
    assert (admitted >= cap.tail_concurrency).mean() >= 0.95 - 0.006
    assert (admitted >= cap.tail_concurrency + 1).mean() < 0.95 + 0.006
    assert cap.tail_concurrency <= cap.expected_concurrency <= cap.fluid_concurrency + 1


def test_methods() -> None:
    assert mix_capacity(20_479, [128, 512, 2048], [0.7, 0.2, 0.1]).method == "exact"
    big = mix_capacity(2_000_000, [2_049, 8_193, 32_769], [0.7, 0.2, 0.1])
    assert big.method == "normal"
    assert (2_000_000 + 1) * (2_000_000 // 2_049) * 3 > MAX_EXACT_WORK


def test_one_length_is_exact() -> None:
    # engine_rules.md §6.2: Llama-3.1-8B, 40 GiB, 8k -> 20,480 blocks, 512 per request, 39
    # resident once the null block is reserved (20,479 usable).
    cap = mix_capacity(20_479, [512], [1.0])
    assert (cap.expected_concurrency, cap.tail_concurrency) == (39.0, 39)


def test_block_rounding_counts() -> None:
    # 2,049 tokens need cdiv(2,049, 16) = 129 blocks, not 128.06: 10 fit in 1,290, not 10.07.
    assert mix_capacity(1_290, [129], [1.0]).tail_concurrency == 10
    assert mix_capacity(1_289, [129], [1.0]).tail_concurrency == 9


def test_nothing_fits() -> None:
    cap = mix_capacity(100, [200, 300], [0.5, 0.5])
    assert cap.tail_concurrency == 0 and cap.expected_concurrency == 0


@pytest.mark.parametrize(
    ("needs", "shares"),
    [([], []), ([1], [0.5, 0.5]), ([0, 1], [0.5, 0.5]), ([1, 2], [-1.0, 2.0])],
)
def test_bad_inputs(needs: list[int], shares: list[float]) -> None:
    with pytest.raises(ValueError):
        mix_capacity(100, needs, shares)
