"""SGLang 0.5.23's start-up rules as the planner applies them. Each expected figure is worked from
SGLang's own source (file named); tests/oracle/test_sglang_oracle.py checks the same rules against
SGLang's code run on CPU over a generated grid."""

from __future__ import annotations

from typing import Any

import pytest

from planner.core.engines.sglang.budget import sglang_default_fraction
from planner.core.engines.sglang.releases import max_req_len, memory_tier, running_requests
from planner.core.errors import FieldError
from planner.core.schema import PlanRequest
from planner.service import plan

GIB = 1 << 30
MIB = 1 << 20


def _plan(**kw: Any) -> Any:
    body = {"model": "meta-llama/Llama-3.1-8B", "engine": "sglang", **kw}
    return plan(PlanRequest.model_validate(body))


def test_memory_tiers() -> None:
    # arg_groups/memory_hook.py: < 20 GiB 2048/8, < 35 GiB 4096/48 (160 at TP ≥ 4), < 60 GiB
    # 4096/32 (160), < 90 GiB and < 160 GiB 8192/256 (512), else 16384/512.
    assert memory_tier(16 * 1024, 1) == (2048, 8)
    assert memory_tier(24 * 1024, 4) == (4096, 160)
    assert memory_tier(40 * 1024, 1) == (4096, 32)
    assert memory_tier(80 * 1024, 8) == (8192, 512)
    assert memory_tier(140 * 1024, 2) == (8192, 256)
    assert memory_tier(180 * 1024, 1) == (16384, 512)


def test_automatic_fraction() -> None:
    # 80 GiB, TP 1: reserved = 512 + 1.5 × 8192 + 1/8 × 1024 + 2 × 256 = 13,440 MiB;
    # round((81920 − 13440) / 81920, 3) = 0.836.
    frac, _ = sglang_default_fraction(
        gpu_memory_bytes=80 * GIB, tensor_parallel_size=1, pipeline_parallel_size=1
    )
    assert frac == 0.836
    # --max-running-requests 8 caps the default graph batch: 13,440 − 2 × 248 = 12,944 MiB.
    frac, _ = sglang_default_fraction(
        gpu_memory_bytes=80 * GIB,
        tensor_parallel_size=1,
        pipeline_parallel_size=1,
        max_running_requests=8,
    )
    assert frac == round((81920 - 12944) / 81920, 3)
    # 24 GiB: 512 + 1.5 × 4096 + 128 + 2 × 48 = 6,880 MiB (no 10 GiB floor below 60 GiB).
    frac, _ = sglang_default_fraction(
        gpu_memory_bytes=24 * GIB, tensor_parallel_size=1, pipeline_parallel_size=1
    )
    assert frac == round((24576 - 6880) / 24576, 3)


def test_running_requests_and_longest_request() -> None:
    # kv_cache_configurator.resolve_max_num_reqs: clamp(tokens / context_len × 512, 2048, 4096),
    # an explicit cap too, both at most tokens // 2.
    assert running_requests(None, 100_000, 131072) == 2048
    assert running_requests(None, 1_000_000, 131072) == 3906
    assert running_requests(None, 1_000_000, 4096) == 4096
    assert running_requests(None, 3000, 4096) == 1500
    assert running_requests(100_000, 3000, 4096) == 1500
    assert running_requests(8, 3000, 4096) == 8
    # tp_worker.get_worker_info: min(context_len − 1, tokens − 1).
    assert max_req_len(131072, 479330) == 131071
    assert max_req_len(131072, 20000) == 19999


def test_plan_uses_the_automatic_fraction_and_the_clamp() -> None:
    p = _plan(gpu="H100-SXM-80GB", weights_bytes=16 * GIB, max_num_seqs=500_000, block_size=1)
    cap = p.capacity
    assert p.engine_version == "0.5.23"
    tokens = cap.engine_reported_tokens
    assert cap.max_num_seqs == tokens // 2
    assert cap.engine_max_request_tokens == min(131072 - 1, tokens - 1)


def test_blackwell_page() -> None:
    # get_default_attn_backend: MHA on SM100 -> trtllm_mha; _mla_backend_page_constraints
    # raises a page outside 16/32/64/128 to 64; 16 is kept.
    assert _plan(gpu="B200-180GB", weights_bytes=16 * GIB).block_size == 64
    assert _plan(gpu="B200-180GB", weights_bytes=16 * GIB, block_size=16).block_size == 16
    assert _plan(gpu="H100-SXM-80GB", weights_bytes=16 * GIB).block_size == 1


def test_kv_dtype_spellings_and_context_length() -> None:
    # arg_groups/fields/model.py: fp8 and fp16 are not --kv-cache-dtype choices.
    for name in ("fp8", "fp16"):
        with pytest.raises(FieldError) as e:
            _plan(kv_budget_bytes=GIB, kv_cache_dtype=name)
        assert e.value.problems[0].field == "kv_cache_dtype"
    assert _plan(kv_budget_bytes=GIB, kv_cache_dtype="fp8_e4m3").kv_cache_dtype == "fp8_e4m3"
    with pytest.raises(FieldError) as e:
        _plan(kv_budget_bytes=GIB, context_length=1 << 20)
    assert e.value.problems[0].field == "context_length"
    assert _plan(kv_budget_bytes=GIB, context_length=4096).model.max_model_len == 4096


def test_sglang_flags_are_refused_elsewhere() -> None:
    for field, value in (("chunked_prefill_size", 4096), ("swa_full_tokens_ratio", 0.5)):
        with pytest.raises(FieldError) as e:
            plan(
                PlanRequest.model_validate(
                    {"model": "meta-llama/Llama-3.1-8B", "kv_budget_bytes": GIB, field: value}
                )
            )
        assert e.value.problems[0].field == field


def test_max_total_tokens_and_swa_ratio() -> None:
    assert _plan(kv_budget_bytes=8 * GIB, max_total_tokens=5000).capacity.max_tokens == 5000
    # pool_configurator.HybridSWAPoolConfigurator: full = budget / (full + ratio × swa cell).
    base = {"model": "openai/gpt-oss-20b", "engine": "sglang", "kv_budget_bytes": 8 * GIB}
    half = plan(PlanRequest.model_validate({**base, "swa_full_tokens_ratio": 0.5}))
    dflt = plan(PlanRequest.model_validate(base))
    assert half.capacity.engine_reported_tokens > dflt.capacity.engine_reported_tokens


def test_dp_attention() -> None:
    # memory_hook.reserve_for_graph_mb: DP attention adds max_bs × D × 3 MiB, and × 1.5 more
    # above a batch of 300: TP 8 (graph batch 512), D 4 on 80 GiB: 512 + 1.5 × 8192 + 1024 +
    # 2 × 512 + 512 × 4 × 3 + 512 × 4 × 1.5 = 24,064 MiB.
    frac, _ = sglang_default_fraction(
        gpu_memory_bytes=80 * GIB, tensor_parallel_size=8, pipeline_parallel_size=1, attn_dp_size=4
    )
    assert frac == round((81920 - 24064) / 81920, 3)
    # Attention TP = 8 / 4 = 2: Qwen3-8B's 8 KV heads are 4 per rank; an explicit
    # --max-running-requests is shared by the 4 workers.
    p = _plan(
        model="Qwen/Qwen3-8B",
        kv_budget_bytes=8 * GIB,
        tensor_parallel_size=8,
        data_parallel_size=4,
        enable_dp_attention=True,
        max_num_seqs=256,
    )
    assert p.per_rank.kv_heads == 4 and p.capacity.max_num_seqs == 64
    with pytest.raises(FieldError) as e:
        _plan(kv_budget_bytes=GIB, tensor_parallel_size=2, data_parallel_size=4,
              enable_dp_attention=True)  # fmt: skip
    assert e.value.problems[0].field == "data_parallel_size"
