"""How many requests of a length mix fit in a KV pool: the expected count and a tail figure.

Requests arrive with independent lengths drawn from the mix (class i with probability p_i needs
b_i blocks, block rounding and the engine's admission rule included). The engine admits them
until the next one does not fit in the U usable blocks; N is how many it holds.
P(N ≥ n) = P(S_n ≤ U), with S_n the blocks of n requests, so

  expected   E[N] = Σ_{n≥1} P(S_n ≤ U)
  tail       N_q  = the largest n with P(S_n ≤ U) ≥ q: n requests fit at least a fraction q of
             the time (q = 0.95: "the concurrency that stays within budget 95 % of the time").

Exact method: the distribution of S_n on the lattice gcd(b_i), truncated at U (a sum that
exceeds U can never come back below it, so the truncation loses nothing), advanced one request
at a time. When that grid is too large: the normal approximation with a continuity correction,
whose tail is closed-form — n·μ + z_q·σ·√n ≤ U is a quadratic in √n.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from statistics import NormalDist
from typing import Literal

import numpy as np

# Above this many cell updates the exact distribution gives way to the normal approximation.
MAX_EXACT_WORK = 40_000_000
_TINY = 1e-12


@dataclass(frozen=True, slots=True)
class MixCapacity:
    usable_units: int
    mean_units: float
    sd_units: float
    fluid_concurrency: float  # U / mean: the long-run average if lengths were perfectly mixed
    expected_concurrency: float
    tail_concurrency: int
    tail_quantile: float
    method: Literal["exact", "normal"]


def normalized(shares: Sequence[float]) -> list[float]:
    total = float(sum(shares))
    if total <= 0 or any(s < 0 for s in shares):
        raise ValueError("shares must be non-negative and not all zero")
    return [s / total for s in shares]


def mix_capacity(
    usable_units: int, needs: Sequence[int], shares: Sequence[float], quantile: float = 0.95
) -> MixCapacity:
    """Expected and tail concurrency of a length mix in a pool of `usable_units` blocks."""
    if not needs or len(needs) != len(shares):
        raise ValueError("needs and shares must be non-empty and of equal length")
    if any(b <= 0 for b in needs):
        raise ValueError("every request needs at least one unit")
    if not 0 < quantile < 1:
        raise ValueError("quantile must be in (0, 1)")
    p = normalized(shares)
    pairs = [(b, w) for b, w in zip(needs, p, strict=True) if w > 0]
    mean = sum(b * w for b, w in pairs)
    var = sum(w * (b - mean) ** 2 for b, w in pairs)
    u = max(0, usable_units)
    fluid = u / mean
    if len({b for b, _ in pairs}) == 1:
        # One length: no randomness, n fit exactly when n·b ≤ U.
        k = u // pairs[0][0]
        return MixCapacity(u, mean, 0.0, fluid, float(k), k, quantile, "exact")
    g = reduce(math.gcd, (b for b, _ in pairs))
    cells = u // g + 1
    steps = u // min(b for b, _ in pairs) + 1
    if cells * steps * len(pairs) <= MAX_EXACT_WORK:
        expected, tail = _exact(u, g, pairs, quantile)
        method: Literal["exact", "normal"] = "exact"
    else:
        expected, tail = _normal(u, g, mean, math.sqrt(var), quantile)
        method = "normal"
    return MixCapacity(u, mean, math.sqrt(var), fluid, expected, tail, quantile, method)


def _exact(u: int, g: int, pairs: list[tuple[int, float]], q: float) -> tuple[float, int]:
    size = u // g + 1
    dist = np.zeros(size)
    dist[0] = 1.0
    expected = 0.0
    tail = 0
    n = 0
    while True:
        nxt = np.zeros(size)
        for b, w in pairs:
            shift = b // g
            if shift < size:
                nxt[shift:] += w * dist[: size - shift]
        dist = nxt
        n += 1
        fit = float(dist.sum())
        if fit < _TINY:
            break
        expected += fit
        if fit >= q:
            tail = n
    return expected, tail


def _normal(u: int, g: int, mean: float, sd: float, q: float) -> tuple[float, int]:
    edge = (u // g + 0.5) * g  # continuity correction on the lattice of sums
    norm = NormalDist()

    def fit(n: int) -> float:
        return norm.cdf((edge - n * mean) / (sd * math.sqrt(n)))

    z = norm.inv_cdf(q)
    root = (-z * sd + math.sqrt(z * z * sd * sd + 4 * mean * edge)) / (2 * mean)
    tail = max(0, math.floor(root * root))
    while tail > 0 and fit(tail) < q:
        tail -= 1
    while fit(tail + 1) >= q:
        tail += 1
    top = edge / mean
    if top > 1e6:
        # Renewal-theory limit (too many terms to sum): E[N] ≈ U/μ + (σ² − μ²) / (2μ²).
        return top + (sd * sd - mean * mean) / (2 * mean * mean), tail
    expected = 0.0
    n = 1
    while True:
        p = fit(n)
        if p < _TINY and n > top:
            break
        expected += p
        n += 1
    return expected, tail


__all__ = ["MAX_EXACT_WORK", "MixCapacity", "mix_capacity", "normalized"]
