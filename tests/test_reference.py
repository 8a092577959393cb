"""The NumPy reference decoder: the cache is exact and the two classic bugs are caught.

Golden values come from seed 000 (softmax row, the P=3/T=2 mask, GQA 32/8) and from the
definition of RoPE; equivalence is between independent paths of the same model.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.lab import reference as ref

SETTINGS = settings(max_examples=30, deadline=None)


@st.composite
def cases(draw: st.DrawFn, min_chunks: int = 1) -> tuple[ref.Shape, list[int], int]:
    kv_heads = draw(st.integers(1, 3))
    shape = ref.Shape(
        layers=draw(st.integers(1, 3)),
        q_heads=kv_heads * draw(st.integers(1, 3)),
        kv_heads=kv_heads,
        head_dim=draw(st.sampled_from([2, 4, 6, 8])),
        model_dim=draw(st.integers(4, 16)),
    )
    chunks = draw(st.lists(st.integers(1, 5), min_size=min_chunks, max_size=5))
    return shape, chunks, draw(st.integers(0, 2**16))


def _setup(case: tuple[ref.Shape, list[int], int]) -> tuple[ref.Model, ref.Array, list[int]]:
    shape, chunks, seed = case
    return ref.init_model(shape, seed), ref.random_tokens(shape, sum(chunks), seed), chunks


@SETTINGS
@given(cases())
def test_full_equals_token_by_token_equals_chunked(case: tuple[ref.Shape, list[int], int]) -> None:
    model, x, chunks = _setup(case)
    full = ref.run_full(model, x)
    tokens, _ = ref.run_tokens(model, x)
    chunked, _ = ref.run_chunks(model, x, chunks)
    assert ref.first_mismatch(full, tokens) is None
    assert ref.first_mismatch(full, chunked) is None


@SETTINGS
@given(cases())
def test_gqa_indexed_path_equals_repeated_heads(case: tuple[ref.Shape, list[int], int]) -> None:
    model, x, chunks = _setup(case)
    indexed, _ = ref.run_chunks(model, x, chunks)
    repeated, _ = ref.run_chunks(model, x, chunks, ref.Options(gqa="repeat"))
    assert ref.first_mismatch(indexed, repeated) is None


@SETTINGS
@given(cases(min_chunks=2))
def test_top_left_mask_is_caught_at_the_first_chunk_after_cached_tokens(
    case: tuple[ref.Shape, list[int], int],
) -> None:
    # The first chunk has P = 0, where both alignments coincide; the second has P = chunks[0] > 0
    # and its first query (position P) wrongly sees only key 0.
    model, x, chunks = _setup(case)
    full = ref.run_full(model, x)
    wrong, _ = ref.run_chunks(model, x, chunks, ref.Options(align="top_left"))
    assert ref.first_mismatch(full, wrong) == chunks[0]


@SETTINGS
@given(cases(min_chunks=2))
def test_zero_position_offset_is_caught_at_the_first_chunk_after_cached_tokens(
    case: tuple[ref.Shape, list[int], int],
) -> None:
    model, x, chunks = _setup(case)
    full = ref.run_full(model, x)
    wrong, _ = ref.run_chunks(model, x, chunks, ref.Options(offset="zero"))
    assert ref.first_mismatch(full, wrong) == chunks[0]


def test_wrong_alignment_is_harmless_only_without_a_cache() -> None:
    shape = ref.Shape()
    model, x = ref.init_model(shape), ref.random_tokens(shape, 6)
    wrong = ref.run_full(model, x, ref.Options(align="top_left", offset="zero"))
    assert ref.first_mismatch(ref.run_full(model, x), wrong) is None


def test_seed_mask_p3_t2_is_2_by_5_and_top_left_shows_q3_only_k0() -> None:
    good = ref.causal_mask(3, 2)
    bad = ref.causal_mask(3, 2, "top_left")
    assert good.shape == bad.shape == (2, 5)  # "mask 不是 2×2"
    assert good.tolist() == [[True] * 4 + [False], [True] * 5]
    rows = ref.mask_rows(3, 2)
    assert rows[0].query_position == 3
    assert rows[0].visible_wrong == (0,)  # "Q3 会只看到 K0"
    assert rows[0].visible_correct == (0, 1, 2, 3)
    assert rows[1].visible_correct == (0, 1, 2, 3, 4)


def test_window_mask_without_reach_is_the_causal_mask() -> None:
    assert (ref.window_mask(3, 4, 100) == ref.causal_mask(3, 4)).all()
    assert ref.window_mask(0, 4, 2).tolist() == [
        [True, False, False, False],
        [True, True, False, False],
        [False, True, True, False],
        [False, False, True, True],
    ]


def test_seed_softmax_row_exactly() -> None:
    ex = ref.softmax_example()
    assert ex.exp_exact == (1, 2, 3)
    assert ex.weights_exact == (Fraction(1, 6), Fraction(2, 6), Fraction(3, 6))
    assert ex.output_exact == Fraction(34, 6)
    # The float path is the decoder's own softmax, fed [0, ln 2, ln 3].
    assert ex.logits[0] == 0.0
    assert ex.weights_float == pytest.approx([1 / 6, 2 / 6, 3 / 6], abs=1e-15)
    assert ex.output_float == pytest.approx(34 / 6, abs=1e-14)


def test_rope_scores_depend_only_on_relative_position() -> None:
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((1, 1, 8)), rng.standard_normal((1, 1, 8))

    def score(m: int, n: int) -> float:
        qm = ref.rope(q, np.array([m], dtype=np.int64))
        kn = ref.rope(k, np.array([n], dtype=np.int64))
        return float((qm * kn).sum())

    assert score(7, 3) == pytest.approx(score(4, 0), abs=1e-12)
    assert score(7, 3) != pytest.approx(score(3, 3), abs=1e-6)


def test_gqa_32_query_heads_over_8_kv_heads_share_in_groups_of_4() -> None:
    shape = ref.Shape(layers=1, q_heads=32, kv_heads=8, head_dim=4, model_dim=8)
    assert shape.group == 4
    assert [ref.kv_head_for(h, shape) for h in (0, 3, 4, 31)] == [0, 0, 1, 7]


def test_more_query_heads_same_kv_heads_same_cache_elements() -> None:
    x = ref.random_tokens(ref.Shape(), 5)
    sizes = set()
    for q_heads in (2, 4, 8):
        shape = ref.Shape(layers=2, q_heads=q_heads, kv_heads=2, head_dim=8, model_dim=32)
        _, cache = ref.run_tokens(ref.init_model(shape), x)
        sizes.add(ref.cache_elements(cache))
    assert sizes == {2 * 2 * 2 * 5 * 8}  # K and V × layers × Hkv × tokens × d


def test_quantized_cache_misses_the_tolerance_and_4_bit_misses_more() -> None:
    shape = ref.Shape()
    model, x = ref.init_model(shape), ref.random_tokens(shape, 8)
    full = ref.run_full(model, x)
    err = {}
    for bits in (8, 4):
        q, _ = ref.run_tokens(model, x, ref.Options(quant_bits=bits))
        assert ref.first_mismatch(full, q) is not None
        err[bits] = ref.max_abs_diff(full, q)
    assert ref.ATOL < err[8] < err[4]


@SETTINGS
@given(st.integers(2, 8), st.integers(0, 2**16))
def test_quantize_error_is_at_most_half_a_step(bits: int, seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal((2, 3, 8))
    step = np.abs(x).max(axis=-1, keepdims=True) / (2 ** (bits - 1) - 1)
    assert (np.abs(ref.quantize(x, bits) - x) <= step / 2 + 1e-12).all()


def test_bad_shapes_and_chunks_are_refused() -> None:
    with pytest.raises(ValueError, match="multiple"):
        ref.Shape(q_heads=3, kv_heads=2)
    with pytest.raises(ValueError, match="even"):
        ref.Shape(head_dim=3)
    shape = ref.Shape()
    with pytest.raises(ValueError, match="sum"):
        ref.run_chunks(ref.init_model(shape), ref.random_tokens(shape, 4), [1, 2])
