"""Counted multiplies match seed 003's closed forms exactly; the cache changes no output."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from planner.lab.counting import (
    MulCounter,
    count_table,
    dot,
    matvec,
    positions_processed,
    random_weights,
)


def test_mul_counts_every_multiply() -> None:
    c = MulCounter()
    assert c.mul(3.0, 4.0) == 12.0
    assert dot(c, [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == 32.0
    assert c.get("projection") == 4
    w = random_weights(5, random.Random(0))
    with c.counting("attention"):
        matvec(c, w.wq, [1.0] * 5)
    assert c.get("attention") == 25


@settings(max_examples=20, deadline=None)
@given(
    d=st.integers(1, 6),
    lengths=st.lists(st.integers(1, 12), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_counts_equal_closed_forms_for_every_length(d: int, lengths: list[int], seed: int) -> None:
    for row in count_table(d, lengths, seed):
        n = row.context_tokens
        assert row.no_cache_projection == 3 * n * d * d
        assert row.no_cache_attention == 2 * n * d
        assert row.cache_projection == 3 * d * d
        assert row.cache_attention == 2 * n * d
        assert row.matches_closed_form
        assert row.outputs_match


def test_cache_fixes_projection_but_attention_still_grows() -> None:
    rows = count_table(4, [1, 2, 4, 8])
    assert {r.cache_projection for r in rows} == {48}
    assert [r.cache_attention for r in rows] == [8, 16, 32, 64]
    # With one token in context there is nothing to re-use.
    assert rows[0].no_cache_projection == rows[0].cache_projection


def test_seed_004_prefill_then_decode_positions() -> None:
    no_cache, cached = positions_processed(4, 3)
    assert no_cache == [4, 5, 6] and sum(no_cache) == 15
    assert cached == [4, 1, 1] and sum(cached) == 6
