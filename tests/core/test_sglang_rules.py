"""SGLang 0.5.23's start-up rules as the planner applies them. Each expected figure is worked from
SGLang's own source (file named); tests/oracle/test_sglang_oracle.py checks the same rules against
SGLang's code run on CPU over a generated grid."""

from __future__ import annotations

from typing import Any

import pytest

from planner.core.engines.sglang.budget import sglang_default_fraction
from planner.core.engines.sglang.multimodal import prefill_graphs_kept
from planner.core.engines.sglang.releases import (
    max_req_len,
    memory_tier,
    prefill_graph_sizes,
    running_requests,
)
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


def test_prefill_graph_sizes() -> None:
    # cuda_graph_hook.generate_prefill_cuda_graph_batch_sizes: 4–32 by 4 (8), 48–256 by 16
    # (14), 288–512 by 32 (8), 576–1024 by 64 (8), 1280–4096 by 256 (12), then by 512.
    assert prefill_graph_sizes(1024) == 38
    assert prefill_graph_sizes(4096) == 50
    assert prefill_graph_sizes(8192) == 50 + 8
    assert prefill_graph_sizes(16384) == 50 + 24


def test_automatic_fraction() -> None:
    # 80 GiB, TP 1: reserved = 512 + 1.5 × 8192 + 1/8 × 1024 + 2 × 256 (decode graphs) + 8 × 58
    # (the prefill graphs captured up to 8192 tokens) = 13,904 MiB; round((81920 − 13904) /
    # 81920, 3) = 0.830.
    frac, _ = sglang_default_fraction(
        gpu_memory_bytes=80 * GIB, tensor_parallel_size=1, pipeline_parallel_size=1
    )
    assert frac == 0.830
    # MLA: the prefill graphs reserve 1.5 GiB flat: 13,440 + 1,536 = 14,976 MiB.
    frac, _ = sglang_default_fraction(
        gpu_memory_bytes=80 * GIB, tensor_parallel_size=1, pipeline_parallel_size=1, is_mla=True
    )
    assert frac == round((81920 - 14976) / 81920, 3)
    # --max-running-requests 8 caps the default graph batch: 13,904 − 2 × 248 = 13,408 MiB.
    frac, _ = sglang_default_fraction(
        gpu_memory_bytes=80 * GIB,
        tensor_parallel_size=1,
        pipeline_parallel_size=1,
        max_running_requests=8,
    )
    assert frac == round((81920 - 13408) / 81920, 3)
    # 24 GiB: 512 + 1.5 × 4096 + 128 + 2 × 48 + 8 × 50 = 7,280 MiB (no 10 GiB floor below 60).
    frac, _ = sglang_default_fraction(
        gpu_memory_bytes=24 * GIB, tensor_parallel_size=1, pipeline_parallel_size=1
    )
    assert frac == round((24576 - 7280) / 24576, 3)
    # PP 2: prefill graphs are opt-in (cuda_graph_hook.apply_cuda_graph_compatibility):
    # 512 + 1.5 × 8192 + 2/8 × 1024 + 2 × 256 = 13,568 MiB.
    frac, _ = sglang_default_fraction(
        gpu_memory_bytes=80 * GIB, tensor_parallel_size=1, pipeline_parallel_size=2
    )
    assert frac == round((81920 - 13568) / 81920, 3)
    # --max-total-tokens 1024 caps the prefill graphs at 1024 tokens: 7,280 − 8 × 12 MiB.
    frac, _ = sglang_default_fraction(
        gpu_memory_bytes=24 * GIB,
        tensor_parallel_size=1,
        pipeline_parallel_size=1,
        max_total_tokens=1024,
    )
    assert frac == round((24576 - 7184) / 24576, 3)


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
    # The note names the ratio the pools were sized with, not the default (kept settings
    # included: the default is asked again after 0.5).
    again = plan(PlanRequest.model_validate(base))
    plans = (half, dflt, again)
    ratio_notes = [[n for n in p.notes if "swa_full_tokens_ratio" in n] for p in plans]
    assert ratio_notes[0] and "ratio 0.5 ×" in ratio_notes[0][0]
    assert "ratio 0.8 ×" in ratio_notes[1][0] and ratio_notes[2] == ratio_notes[1]


def test_dp_attention() -> None:
    # memory_hook.reserve_for_graph_mb: DP attention adds max_bs × D × 3 MiB, and × 1.5 more
    # above a batch of 300: TP 8 (graph batch 512), D 4 on 80 GiB: 512 + 1.5 × 8192 + 1024 +
    # 2 × 512 + 512 × 4 × 3 + 512 × 4 × 1.5 + 8 × 58 (prefill graphs) = 24,528 MiB.
    frac, _ = sglang_default_fraction(
        gpu_memory_bytes=80 * GIB, tensor_parallel_size=8, pipeline_parallel_size=1, attn_dp_size=4
    )
    assert frac == round((81920 - 24528) / 81920, 3)
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


def test_rules_keyed_by_release() -> None:
    # memory_hook.handle_gpu_memory_settings, sglang-0.5.19 wheel: the 20–35 GiB tier is
    # chunked_prefill_size 2048 with a graph batch of 24 (80 at TP ≥ 4); 0.5.20's is 4096/48/160.
    assert memory_tier(24 * 1024, 1, (0, 5, 19)) == (2048, 24)
    assert memory_tier(24 * 1024, 4, (0, 5, 19)) == (2048, 80)
    assert memory_tier(24 * 1024, 1, (0, 5, 20)) == (4096, 48)
    assert memory_tier(80 * 1024, 1, (0, 5, 19)) == (8192, 256)
    # sglang-0.5.21 wheel: an explicit --max-running-requests does not cap the default graph
    # batch, so 80 GiB at TP 1 reserves 512 + 1.5 × 8192 + 128 + 2 × 256 + 8 × 58 = 13,904 MiB
    # whatever the cap; 0.5.22 caps the batch at 8: 13,904 − 2 × 248 = 13,408 MiB.
    for version, reserved in (((0, 5, 21), 13904), ((0, 5, 22), 13408)):
        frac, _ = sglang_default_fraction(
            gpu_memory_bytes=80 * GIB,
            tensor_parallel_size=1,
            pipeline_parallel_size=1,
            max_running_requests=8,
            version=version,
        )
        assert frac == round((81920 - reserved) / 81920, 3)
    # The explicit running cap (_resolve_max_num_reqs): 3,000 tokens at context 4,096 give an
    # estimate of int(3000 / 4096 × 512) = 375, clamped to 2,048. 0.5.14 on: min(asked,
    # 3000 // 2); 0.5.10–0.5.13: min(asked, 2,048); 0.5.9: asked as given, the default 2,048.
    assert running_requests(100_000, 3000, 4096, version=(0, 5, 14)) == 1500
    assert running_requests(100_000, 3000, 4096, version=(0, 5, 13)) == 2048
    assert running_requests(None, 3000, 4096, version=(0, 5, 10)) == 1500
    assert running_requests(100_000, 3000, 4096, version=(0, 5, 9)) == 100_000
    assert running_requests(None, 3000, 4096, version=(0, 5, 9)) == 2048
    # server_args.py, sglang-0.5.8.post1 wheel: piecewise prefill graphs are opt-in, so 80 GiB at
    # TP 1 reserves 512 + 1.5 × 8192 + 128 + 2 × 256 = 13,440 MiB, no prefill graphs.
    frac, _ = sglang_default_fraction(
        gpu_memory_bytes=80 * GIB, tensor_parallel_size=1, pipeline_parallel_size=1,
        version=(0, 5, 9),
    )  # fmt: skip
    assert frac == round((81920 - 13440) / 81920, 3)


def test_plan_follows_the_release() -> None:
    # The same deployment at 0.5.21 and 0.5.22: only 0.5.22 lets --max-running-requests 8 lower
    # the reserve, so its fraction is the larger.
    kw: dict[str, Any] = {"gpu": "H100-SXM-80GB", "weights_bytes": 16 * GIB, "max_num_seqs": 8}
    old = _plan(engine_version="0.5.21", **kw).capacity.budget.gpu_memory_utilization
    new = _plan(engine_version="0.5.22", **kw).capacity.budget.gpu_memory_utilization
    plain = _plan(gpu="H100-SXM-80GB", weights_bytes=16 * GIB).capacity.budget
    assert old == plain.gpu_memory_utilization < new


def test_swa_stage_holds_the_next_stages_first_layer_from_0_5_7_to_0_5_20() -> None:
    # layer_setup.adjust_hybrid_swa_layer_ids, sglang-0.5.20 wheel (model_runner.py from 0.5.7):
    # a stage's SWA and full layer ids are range(start_layer, end_layer + 1). gpt-oss-20b (24
    # layers, sliding ones even, 2,048 B a token each) at PP 2: stage 0 sizes layers 0–12, 7
    # sliding and 6 full, so 8 GiB holds 8 GiB // (2048 × (6 + 0.8 × 7)) tokens; 0.5.21's stage
    # holds its own 6 + 6 (ModelLayerInfo), and 0.5.6's its built layers.
    for version, sliding in (("0.5.6", 6), ("0.5.7", 7), ("0.5.20", 7), ("0.5.21", 6)):
        p = _plan(model="openai/gpt-oss-20b", engine_version=version, kv_budget_bytes=8 * GIB,
                  pipeline_parallel_size=2)  # fmt: skip
        assert p.capacity.engine_reported_tokens == int(8 * GIB // (2048 * (6 + 0.8 * sliding)))


def test_kda_prefill_graphs_from_0_5_20() -> None:
    # cuda_graph_hook.disable_breakable_cudagraph_if_incompatible: the "KDA hybrid linear
    # attention" rule is in the sglang-0.5.20 wheel, not in 0.5.19's, so 0.5.19 keeps the
    # default prefill graphs for Kimi-Linear (and its MLA reserve of 1.5 GiB).
    kimi = ("KimiLinearForCausalLM",)
    assert prefill_graphs_kept(kimi, (0, 5, 19)) and not prefill_graphs_kept(kimi, (0, 5, 20))


@pytest.mark.parametrize(
    "model", ["nvidia/NVIDIA-Nemotron-Nano-9B-v2", "nvidia/Nemotron-H-56B-Base-8K"]
)
def test_nemotron_h_across_pipeline_stages_is_refused_not_a_crash(model: str) -> None:
    """Nemotron-H's hybrid_override_pattern has MLP-only layers ("-"), which hold no cache, so its
    cache layers (31 of the Nano's 56) do not index SGLang's per-stage split of the 56; this used
    to end in an IndexError (a 500 over the API). PP 1 still plans."""
    body = {"model": model, "engine": "sglang", "gpu": "B200-180GB", "tensor_parallel_size": 4,
            "context_tokens": 8192}  # fmt: skip
    assert plan(PlanRequest.model_validate(body)).capacity.max_requests > 0
    with pytest.raises(FieldError) as e:
        plan(PlanRequest.model_validate({**body, "pipeline_parallel_size": 2}))
    assert e.value.problems[0].field == "pipeline_parallel_size"
    assert e.value.problems[0].code == "sglang.hybrid_pipeline_unmodelled"
