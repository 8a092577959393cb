"""Count the multiplications of one decode step, with and without a KV cache (seed 003).

Every multiply goes through `MulCounter.mul`, so the table is counted, not derived. One layer, one
head, model dim d, context length n (the new token included):

    no cache: projection 3·n·d²   attention 2·n·d   (q, k, v for every position, again)
    cache:    projection 3·d²     attention 2·n·d   (only the new token is projected)

The cache removes recomputation, not attention: the last two terms still grow with n. Softmax's
exp, the 1/sqrt(d) scale and the normalising division are not multiplies of the formula and are
done with plain operators, as in the seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

Vector = list[float]
Matrix = list[list[float]]
KV = tuple[Vector, Vector]


@dataclass
class MulCounter:
    """`mul(a, b)` multiplies and counts, per phase ("projection" or "attention")."""

    counts: dict[str, int] = field(default_factory=dict)
    phase: str = "projection"

    def mul(self, a: float, b: float) -> float:
        self.counts[self.phase] = self.counts.get(self.phase, 0) + 1
        return a * b

    @contextmanager
    def counting(self, phase: str) -> Iterator[None]:
        before, self.phase = self.phase, phase
        try:
            yield
        finally:
            self.phase = before

    def get(self, phase: str) -> int:
        return self.counts.get(phase, 0)


@dataclass(frozen=True, slots=True)
class Weights:
    wq: Matrix
    wk: Matrix
    wv: Matrix

    @property
    def dim(self) -> int:
        return len(self.wq)


def random_weights(d: int, rng: random.Random) -> Weights:
    def m() -> Matrix:
        return [[rng.gauss(0.0, 1.0 / math.sqrt(d)) for _ in range(d)] for _ in range(d)]

    return Weights(m(), m(), m())


def random_vectors(d: int, n: int, rng: random.Random) -> list[Vector]:
    return [[rng.gauss(0.0, 1.0) for _ in range(d)] for _ in range(n)]


def dot(c: MulCounter, a: Vector, b: Vector) -> float:
    return sum(c.mul(x, y) for x, y in zip(a, b, strict=True))


def matvec(c: MulCounter, m: Matrix, x: Vector) -> Vector:
    return [dot(c, row, x) for row in m]


def project(c: MulCounter, w: Weights, x: Vector) -> tuple[Vector, Vector, Vector]:
    """q, k, v of one position: 3·d² multiplies."""
    with c.counting("projection"):
        return matvec(c, w.wq, x), matvec(c, w.wk, x), matvec(c, w.wv, x)


def attend(c: MulCounter, q: Vector, cache: Sequence[KV]) -> Vector:
    """One query over n cached (k, v): n·d for the scores, n·d to mix the values."""
    with c.counting("attention"):
        scale = math.sqrt(len(q))
        scores = [dot(c, q, k) / scale for k, _ in cache]
        top = max(scores)
        e = [math.exp(s - top) for s in scores]
        total = sum(e)
        weights = [x / total for x in e]
        return [
            sum(c.mul(wt, v[i]) for wt, (_, v) in zip(weights, cache, strict=True))
            for i in range(len(q))
        ]


def decode_no_cache(c: MulCounter, w: Weights, xs: Sequence[Vector]) -> Vector:
    """Next-token output with no cache: re-project the whole context, then attend from the last."""
    projected = [project(c, w, x) for x in xs]
    cache = [(k, v) for _, k, v in projected]
    return attend(c, projected[-1][0], cache)


def decode_cached(c: MulCounter, w: Weights, cache: list[KV], x_new: Vector) -> Vector:
    """Next-token output with a cache: project only x_new, append its k/v, then attend."""
    q, k, v = project(c, w, x_new)
    cache.append((k, v))
    return attend(c, q, cache)


def closed_form_no_cache(n: int, d: int) -> tuple[int, int]:
    return 3 * n * d * d, 2 * n * d


def closed_form_cached(n: int, d: int) -> tuple[int, int]:
    return 3 * d * d, 2 * n * d


@dataclass(frozen=True, slots=True)
class CountRow:
    context_tokens: int
    no_cache_projection: int
    no_cache_attention: int
    cache_projection: int
    cache_attention: int
    outputs_match: bool
    matches_closed_form: bool


def build_cache(w: Weights, xs: Sequence[Vector]) -> list[KV]:
    """The k, v of each earlier token: earlier steps' work, so counted on a throwaway counter."""
    warmup = MulCounter()
    return [(k, v) for _, k, v in (project(warmup, w, x) for x in xs)]


def count_row(
    w: Weights, xs: Sequence[Vector], cache: list[KV] | None = None, tol: float = 1e-9
) -> CountRow:
    """Count one decode step at context length n = len(xs), both ways, and compare outputs.

    `cache`, if given, holds the k, v of xs[:-1] (a causal cache depends on nothing later).
    """
    n, d = len(xs), w.dim
    plain = MulCounter()
    y_plain = decode_no_cache(plain, w, xs)
    cache = list(cache) if cache is not None else build_cache(w, xs[:-1])
    cached = MulCounter()
    y_cached = decode_cached(cached, w, cache, xs[-1])
    counted = (
        (plain.get("projection"), plain.get("attention")),
        (cached.get("projection"), cached.get("attention")),
    )
    return CountRow(
        context_tokens=n,
        no_cache_projection=counted[0][0],
        no_cache_attention=counted[0][1],
        cache_projection=counted[1][0],
        cache_attention=counted[1][1],
        outputs_match=all(abs(a - b) <= tol for a, b in zip(y_plain, y_cached, strict=True)),
        matches_closed_form=counted == (closed_form_no_cache(n, d), closed_form_cached(n, d)),
    )


def count_table(d: int, lengths: Sequence[int], seed: int = 0) -> tuple[CountRow, ...]:
    """One row per context length; the same weights and token prefix throughout."""
    if d < 1 or any(n < 1 for n in lengths):
        raise ValueError("d and every length must be at least 1")
    rng = random.Random(seed)
    w = random_weights(d, rng)
    xs = random_vectors(d, max(lengths, default=0), rng)
    cache = build_cache(w, xs)
    return tuple(count_row(w, xs[:n], cache[: n - 1]) for n in lengths)


def positions_processed(prompt_tokens: int, new_tokens: int) -> tuple[list[int], list[int]]:
    """Positions each forward pass handles while producing `new_tokens` (seed 004 §01/§04).

    Prompt 4, three new tokens: no cache 4+5+6 = 15, cache 4+1+1 = 6 (prefill, then decode).
    That is positions, not time: it does not make inference 15/6 = 2.5x faster.
    """
    no_cache = [prompt_tokens + i for i in range(new_tokens)]
    cached = [prompt_tokens] + [1] * (new_tokens - 1) if new_tokens else []
    return no_cache, cached
