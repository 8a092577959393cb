"""Ring-buffer sliding-window cache: length, absolute position and slot kept apart (seed 000)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from planner.lab import reference as ref
from planner.lab.ring import check_ring, ring_slots, run_ring


def test_seed_five_tokens_capacity_four() -> None:
    # "已有 5 个 token，窗口物理容量为 4。新 token 的 RoPE 位置继续增长，写入槽位按容量取模。"
    steps = ring_slots(6, 4)
    after_five, new = steps[4], steps[5]
    assert after_five.slots == (4, 1, 2, 3)
    assert after_five.cache_tokens == 4
    assert (new.position, new.slot, new.cache_tokens) == (5, 1, 4)
    assert new.slots == (4, 5, 2, 3)


def test_cache_length_grows_to_capacity_then_stays() -> None:
    assert [s.cache_tokens for s in ring_slots(7, 3)] == [1, 2, 3, 3, 3, 3, 3]
    assert [s.slot for s in ring_slots(7, 3)] == [0, 1, 2, 0, 1, 2, 0]


@settings(max_examples=25, deadline=None)
@given(
    capacity=st.integers(1, 6),
    tokens=st.integers(1, 12),
    kv_heads=st.integers(1, 2),
    group=st.integers(1, 2),
    seed=st.integers(0, 2**16),
)
def test_ring_decode_equals_full_attention_with_window_mask(
    capacity: int, tokens: int, kv_heads: int, group: int, seed: int
) -> None:
    shape = ref.Shape(
        layers=2, q_heads=kv_heads * group, kv_heads=kv_heads, head_dim=4, model_dim=8
    )
    model = ref.init_model(shape, seed)
    x = ref.random_tokens(shape, tokens, seed)
    check = check_ring(model, x, capacity)
    assert check.passed, check


def test_ring_wider_than_the_sequence_is_plain_causal_attention() -> None:
    shape = ref.Shape()
    model, x = ref.init_model(shape), ref.random_tokens(shape, 6)
    assert ref.first_mismatch(run_ring(model, x, 8), ref.run_full(model, x)) is None


def test_window_really_drops_old_tokens() -> None:
    shape = ref.Shape()
    model, x = ref.init_model(shape), ref.random_tokens(shape, 6)
    # Positions 0..2 fit a 3-slot ring unchanged; position 3 is the first to lose a key.
    assert ref.first_mismatch(run_ring(model, x, 3), ref.run_full(model, x)) == 3
