"""The decode floor of mixture-of-experts models reads the experts the batch touches, not every
expert (published active-parameter counts are the check)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.conftest import GiB, run


def _read_bytes(model: str, tp: int, gpu: str, batch: int) -> tuple[float, float, float]:
    """(weights read per step on all ranks, KV read seconds, weights seconds) at a batch."""
    p = run(
        model=model,
        tensor_parallel_size=tp,
        gpu=gpu,
        requests=[{"context_tokens": 4096, "count": batch}],
        kv_budget_bytes=40 * GiB,
    )
    b = p.bounds
    assert b is not None
    return (
        b.weights_read_seconds * b.bandwidth_bytes_per_s * tp,
        b.kv_read_seconds,
        (b.weights_read_seconds),
    )


@pytest.mark.parametrize(
    ("model", "tp", "gpu", "active_params", "bytes_per_param"),
    [
        # DeepSeek-V3 model page: 671 B total, 37 B activated per token; FP8 weights.
        ("deepseek-ai/DeepSeek-V3", 8, "H200-141GB", 37e9, 1.0),
        # Qwen3-30B-A3B model page: 30.5 B total, 3.3 B activated; bf16.
        ("Qwen/Qwen3-30B-A3B", 1, "H100-SXM-80GB", 3.3e9, 2.0),
        # Mixtral-8x7B announcement: 46.7 B total, 12.9 B per token; bf16.
        ("mistralai/Mixtral-8x7B-v0.1", 2, "H100-SXM-80GB", 12.9e9, 2.0),
    ],
)
def test_batch_one_reads_the_active_weights(
    model: str, tp: int, gpu: str, active_params: float, bytes_per_param: float
) -> None:
    read, _, _ = _read_bytes(model, tp, gpu, 1)
    # Within 10 %: block scales, bf16 norms/router and the (indexed, not streamed) embedding.
    assert read == pytest.approx(active_params * bytes_per_param, rel=0.10)


def test_gpt_oss_120b_batch_one_reads_a_tenth_of_its_weights() -> None:
    # gpt-oss model card: 116.8 B total, 5.1 B active; MXFP4 experts (4.25 bits), bf16 rest.
    read, _, _ = _read_bytes("openai/gpt-oss-120b", 1, "H100-SXM-80GB", 1)
    assert 5.1e9 * 4.25 / 8 <= read <= 5.1e9 * 2
    everything, _, _ = _read_bytes("openai/gpt-oss-120b", 1, "H100-SXM-80GB", 4096)
    assert read < 0.1 * everything


def test_the_note_states_the_routing_assumption() -> None:
    p = run(model="Qwen/Qwen3-30B-A3B", gpu="H100-SXM-80GB", context_tokens=4096,
            kv_budget_bytes=40 * GiB)  # fmt: skip
    assert any(n.code == "bounds.moe_active_weights" for n in p.notes_detail)


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(min_value=1, max_value=4096))
def test_floor_lies_between_kv_only_and_all_experts(batch: int) -> None:
    read, kv_seconds, weights_seconds = _read_bytes("Qwen/Qwen3-30B-A3B", 1, "H100-SXM-80GB", batch)
    everything = run(model="Qwen/Qwen3-30B-A3B", context_tokens=4096, kv_budget_bytes=GiB)
    total = everything.model.weights_bytes
    assert total is not None
    assert 0 < read <= total
    step = kv_seconds + weights_seconds
    assert kv_seconds <= step <= kv_seconds + total / 3.35e12
    bigger, _, _ = _read_bytes("Qwen/Qwen3-30B-A3B", 1, "H100-SXM-80GB", min(4096, batch * 2))
    assert bigger >= read  # more tokens never touch fewer experts
