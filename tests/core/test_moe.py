"""Weights a MoE decode step reads: E·(1 − (1 − k/E)^B) distinct experts per MoE layer.

The property test checks the floor at every batch lies between the KV-only bound and the
all-experts figure, and equals the active weights at batch 1; the catalog checks pin batch 1
to each model's active parameters (published figures in tests/core/test_params.py).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.catalog import get_model
from planner.core.moe import decode_floor_bytes, decode_weight_read, expected_distinct_experts
from planner.core.params import WeightBytes, parameter_counts, weight_bytes


def test_distinct_experts_closed_form() -> None:
    # Hand values: E = 8, k = 2: B = 1 → 2; B = 2 → 8·(1 − 0.75²) = 3.5; B = 3 → 8·(1 − 0.75³).
    assert expected_distinct_experts(8, 2, 1) == 2
    assert expected_distinct_experts(8, 2, 2) == pytest.approx(3.5)
    assert expected_distinct_experts(8, 2, 3) == pytest.approx(8 * (1 - 0.75**3))
    assert expected_distinct_experts(256, 8, 10_000) == pytest.approx(256)
    assert expected_distinct_experts(0, 0, 5) == 0


@given(
    e=st.integers(1, 1024),
    k=st.integers(1, 64),
    b=st.integers(1, 1 << 20),
)
def test_distinct_experts_bounds(e: int, k: int, b: int) -> None:
    k = min(k, e)
    d = expected_distinct_experts(e, k, b)
    assert k - 1e-9 <= d <= min(e, k * b) + 1e-9
    assert expected_distinct_experts(e, k, b + 1) >= d - 1e-9  # never fewer with more tokens


weights_strategy = st.builds(
    lambda dense, emb, expert, e, k, layers, tied: WeightBytes(
        total=dense + layers * e * expert,
        embedding=min(emb, dense),
        dense=dense,
        expert=expert,
        num_experts=e,
        top_k=min(k, e),
        moe_layers=layers,
        tied_embeddings=tied,
    ),
    st.integers(1, 1 << 40),
    st.integers(0, 1 << 34),
    st.integers(1, 1 << 30),
    st.integers(1, 512),
    st.integers(1, 16),
    st.integers(0, 128),
    st.booleans(),
)


@given(w=weights_strategy, b=st.integers(1, 1 << 16), kv=st.integers(0, 1 << 40))
def test_floor_between_kv_only_and_all_experts(w: WeightBytes, b: int, kv: int) -> None:
    floor = decode_floor_bytes(w, b, kv)
    assert kv <= floor <= w.all_experts + kv
    assert decode_floor_bytes(w, 1, kv) == w.active + kv
    assert decode_floor_bytes(w, b + 1, kv) >= floor


@pytest.mark.parametrize(
    "model_id",
    [
        "deepseek-ai/DeepSeek-V3",
        "Qwen/Qwen3-30B-A3B",
        "openai/gpt-oss-120b",
        "mistralai/Mixtral-8x7B-v0.1",
    ],
)
def test_batch_one_reads_the_active_weights(model_id: str) -> None:
    cfg = get_model(model_id).config
    w = weight_bytes(cfg)
    p = parameter_counts(cfg)
    one = decode_weight_read(w, 1)
    assert one.experts_per_layer == p.top_k
    assert one.total_bytes == w.active
    # Far below the all-experts read the old floor used (DeepSeek-V3: 37.7 GB of 673 GB).
    assert one.total_bytes < 0.3 * w.all_experts
    # The same split in parameters: dense read + top-k experts = active minus the input table.
    assert p.active_without_embedding_lookup == (
        p.dense - (p.embedding if p.lm_head else 0) - p.vision + p.moe_layers * p.top_k * p.expert
    )


def test_dense_models_read_the_same_bytes_at_every_batch() -> None:
    w = weight_bytes(get_model("meta-llama/Llama-3.1-8B").config)
    assert decode_weight_read(w, 1).total_bytes == decode_weight_read(w, 512).total_bytes
    # 8.03 B parameters less the 525 M-entry input table, 2 bytes each.
    assert decode_weight_read(w, 1).total_bytes == 2 * (8_030_261_248 - 128256 * 4096)
