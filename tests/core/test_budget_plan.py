"""The engine's budget and start verdict through plan(), pinned to real start-up logs
(tests/fixtures/budget_logs.jsonl holds them with their sources)."""

from __future__ import annotations

import pytest

from planner.core.errors import FieldError
from tests.core.conftest import GiB, run

# vllm#34076 (vLLM 0.15): Qwen3-Coder-30B-A3B-FP8, PP 2, max_model_len 262,144, 3.18 GiB
# available. Whole model (vllm#32105 era): 48 layers × 2 × 4 KV heads × 128 × 2 B = 98,304 B
# per token, so 262,144 tokens need 24.0 GiB; 3.18 GiB hold 2,171 blocks of 16 = 34,736 tokens.
QWEN3_CODER = {
    "model_type": "qwen3_moe",
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "hidden_size": 2048,
    "max_position_embeddings": 262144,
    "torch_dtype": "bfloat16",
}
LOGGED_34076 = (
    "To serve at least one request with the models's max seq len (262144), (24.0 GiB KV cache "
    "is needed, which is larger than the available KV cache memory (3.18 GiB). Based on the "
    "available memory, the estimated maximum model length is 34736. Try increasing "
    "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
)


def test_pp2_max_model_len_estimate_uses_the_whole_model() -> None:
    p = run(
        model=QWEN3_CODER,
        engine_version="0.15",
        pipeline_parallel_size=2,
        context_tokens=262144,
        # The log prints 3.18 GiB (two decimals, [3.175, 3.185) GiB); its estimate, 2,171
        # blocks of 1,572,864 B, narrows that to [3.1803, 3.1818) GiB.
        kv_budget_bytes=round(3.181 * GiB),
    )
    c = p.capacity
    assert c is not None
    assert c.engine_starts is False
    assert c.estimated_max_model_len == 34736
    assert c.start_error is not None and c.start_error.startswith(LOGGED_34076)
    assert any(n.code == "engine.refuses_to_start" for n in p.notes_detail)


def test_gpt_oss_120b_on_one_h100_does_not_start() -> None:
    # vllm#23278 (vLLM 0.10.1): 65.9651 GiB of weights loaded on a 79.19 GiB H100, defaults
    # (util 0.9, 1,024 sequences, 8,192 batched tokens); the log says -2.14 GiB available.
    gpu = {
        "name": "NVIDIA H100 80GB HBM3",
        "memory_bytes": round(79.19 * GiB),
        "bandwidth_bytes_per_s": 3.35e12,
    }
    p = run(
        model="openai/gpt-oss-120b",
        engine_version="0.10.1",
        gpu=gpu,
        weights_bytes=round(65.9651 * GiB),
        context_tokens=131072,
    )
    c = p.capacity
    assert c is not None
    available = c.budget.engine_available_bytes
    assert available is not None and abs(available / GiB - (-2.14)) <= 0.05 * 79.19 * 0.9
    assert c.engine_starts is False and c.max_requests == 0
    assert c.start_error is not None
    assert c.start_error.startswith("No available memory for the cache blocks.")
    names = [t.name for t in c.budget.terms]
    assert names == [
        "weights_bytes_per_rank",
        "activation_peak_bytes",
        "non_torch_bytes",
        "cuda_graph_bytes",
        "reserve_bytes",
    ]


def test_terms_can_be_overridden() -> None:
    # What reconcile learns from a log (activation, non-torch, graphs) fed back as overrides:
    # the budget is then the engine's formula over the given terms.
    p = run(
        model="meta-llama/Llama-3.1-8B",
        gpu="H100-SXM-80GB",
        weights_bytes=16 * GiB,
        activation_peak_bytes=2 * GiB,
        non_torch_bytes=GiB // 4,
        cuda_graph_bytes=GiB,
        gpu_memory_utilization=0.9,
        context_tokens=8192,
    )
    b = p.capacity.budget if p.capacity else None
    assert b is not None and b.requested_bytes is not None
    assert b.activation_peak_bytes == 2 * GiB and b.non_torch_bytes == GiB // 4
    graphs = GiB if b.cuda_graph_subtracted else 0
    assert b.kv_budget_bytes == b.requested_bytes - 16 * GiB - 2 * GiB - GiB // 4 - graphs


def test_a_budget_larger_than_the_gpu_is_refused() -> None:
    # An L40S holds 44.42 GiB as torch sees it; 48 GiB of KV cannot be allocated there by any
    # engine, so it is a field error, not a plan.
    with pytest.raises(FieldError) as e:
        run(model="meta-llama/Llama-3.1-8B", gpu="L40S-48GB", kv_budget_bytes=48 * GiB,
            context_tokens=8192)  # fmt: skip
    assert e.value.problems[0].loc == ("kv_budget_bytes",)


def test_a_given_budget_counts_the_weights_on_the_gpu() -> None:
    # Weights are allocated before the KV tensors (vLLM skips the profile for a given budget):
    # 16 GiB of weights + 30 GiB of KV do not fit 44.42 GiB; 16 + 20 do.
    over = run(model="meta-llama/Llama-3.1-8B", gpu="L40S-48GB", kv_budget_bytes=30 * GiB,
               weights_bytes=16 * GiB, context_tokens=8192)  # fmt: skip
    assert over.capacity is not None and over.capacity.engine_starts is False
    assert over.capacity.budget.weights_bytes_per_rank == 16 * GiB
    fits = run(model="meta-llama/Llama-3.1-8B", gpu="L40S-48GB", kv_budget_bytes=20 * GiB,
               weights_bytes=16 * GiB, context_tokens=8192)  # fmt: skip
    assert fits.capacity is not None and fits.capacity.engine_starts is True
    # TP 2 halves the weights per GPU: 8 + 30 fit.
    tp2 = run(model="meta-llama/Llama-3.1-8B", gpu="L40S-48GB", kv_budget_bytes=30 * GiB,
              weights_bytes=16 * GiB, tensor_parallel_size=2, context_tokens=8192)  # fmt: skip
    assert tp2.capacity is not None and tp2.capacity.engine_starts is True
