"""Reconcile real start-up logs with kvplan's rules.

Every expected number below is the fixture's own hand recomputation (`recomputed.expected`,
`recomputed.delta` in tests/fixtures/engine_logs.jsonl, sources: the public issue threads named
in each fixture), never this implementation's output. Model geometry comes from each fixture's
`recomputed.model_config` where the catalog lacks the model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.core.errors import FieldError
from planner.core.logs.lines import MAX_LINE_CHARS
from planner.core.notes import TEMPLATES
from planner.core.reconcile_schema import Check, ReconcileRequest, ReconcileResult
from planner.core.schema import PlanRequest
from planner.service import plan, reconcile
from tests.core.test_logparse import ENGINE, load_fixtures

FIXTURES = {f["id"]: f for f in load_fixtures()}


def _config(
    layers: int, kv_heads: int, head_dim: int, heads: int, dtype: str = "bfloat16"
) -> dict[str, Any]:
    return {
        "model_type": "qwen3",
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "torch_dtype": dtype,
    }


# recomputed.model_config of the fixtures (query-head counts from the models' configs).
QWEN3_14B = _config(40, 8, 128, 40)
QWEN3_235B = _config(94, 4, 128, 64)
# Also the geometry the 25350 fixtures infer; its length is long enough for their logged
# max_model_len (100,000 and 221,000): without one Qwen3Config's default 32,768 applies.
QWEN3_30B_A3B = {**_config(48, 4, 128, 32), "max_position_embeddings": 262144}
QWEN3_1P7B = _config(28, 8, 128, 16)
QWEN25_14B = _config(48, 8, 128, 40)  # DeepSeek-R1-Distill-Qwen-14B
QWQ_32B = _config(64, 8, 128, 40)
QWEN15_7B = _config(32, 32, 128, 32, "float16")
TINYLLAMA = _config(22, 4, 64, 32)
LLAMA2_7B = _config(32, 32, 128, 32, "float16")
GRANITE_MICRO = {
    "_name_or_path": "ibm-granite/granite-4.0-micro",
    "model_type": "granite",
    "num_hidden_layers": 40,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "hidden_size": 2560,  # head_dim 64 = 2560 / 40
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 131072,
}
# The published configs (tests/fixtures/hybrid_models.json).
HYBRID = {
    m["id"]: m["config"]
    for m in json.loads(
        (Path(__file__).parents[1] / "fixtures" / "hybrid_models.json").read_text()
    )["models"]
}
KIMI_LINEAR = HYBRID["moonshotai/Kimi-Linear-48B-A3B-Instruct"]
# granite-4.0-micro as published: the hybrid architecture with every layer "attention".
GRANITE_MICRO_PUBLISHED = {
    **{k: v for k, v in GRANITE_MICRO.items() if k != "model_type"},
    "model_type": "granitemoehybrid",
    "architectures": ["GraniteMoeHybridForCausalLM"],
    "layer_types": ["attention"] * 40,
    "mamba_n_heads": 128,
    "mamba_d_head": 64,
    "mamba_d_state": 256,
    "mamba_n_groups": 1,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
}

# fixture id -> (model, settings the log lacks)
INPUTS: dict[str, tuple[Any, dict[str, Any]]] = {
    "vllm-v1-qwen3-14b-lmcache1739": (QWEN3_14B, {}),
    "vllm-v1-qwen3-235b-fp8-tp4-vllm21348": (QWEN3_235B, {"tensor_parallel_size": 4}),
    "vllm-v1-fp8kv-mml100k-vllm25350": (QWEN3_30B_A3B, {"kv_cache_dtype": "fp8"}),
    "vllm-v1-fp8kv-mml221k-error-vllm25350": (QWEN3_30B_A3B, {"kv_cache_dtype": "fp8"}),
    "vllm-v1early-llama31-70b-w8a8-pr12569": ("meta-llama/Llama-3.1-70B", {"vllm_engine": "v1"}),
    # The thread says "Nov 2025": a build between 0.11.0 and 0.11.1 (its gpu_worker.py line
    # 349 is no release's); 0.11's hybrid rules reproduce its figures.
    "vllm-v1-kimi-linear-awq-tp2-3090-vllm28228": (
        KIMI_LINEAR,
        {"tensor_parallel_size": 2, "engine_version": "0.11"},
    ),
    "vllm-v1-qwen3-1p7b-24gb-vllm33263": (QWEN3_1P7B, {}),
    "vllm-v1-granite4-micro-fp8-l40s-ibmcodeengine": (GRANITE_MICRO, {}),
    "vllm-v1-qwen3-coder-30b-fp8-pp2-uneven-error-vllm34076": (
        QWEN3_30B_A3B,
        {"pipeline_parallel_size": 2, "pipeline_layer_partition": [16, 32]},
    ),
    "vllm-v1-gptoss120b-eagle3-padding-pr29303": ("openai/gpt-oss-120b", {"draft_layers": 1}),
    "vllm-v0-llama31-8b-3090-20k-vllm10517": ("meta-llama/Llama-3.1-8B", {}),
    "vllm-v0-llama31-8b-3090-29k-error-vllm10517": ("meta-llama/Llama-3.1-8B", {}),
    "vllm-v0-r1-distill-qwen14b-tp2-4090-vllm13061": (QWEN25_14B, {"tensor_parallel_size": 2}),
    "vllm-v0-gemma3-27b-awq-a10g-error-vllm16199": ("google/gemma-3-27b-it", {}),
    "sglang-qwen3-235b-fp8-tp4-vllm21348": (QWEN3_235B, {"tensor_parallel_size": 4}),
    "sglang-qwq32b-tp4-l4-llms-in-clouds": (
        QWQ_32B,
        {"tensor_parallel_size": 4, "mem_fraction_static": 0.85},
    ),
    "sglang-qwen3-30b-a3b-fp8-mi355-pr18263": (QWEN3_30B_A3B, {}),
    "trtllm-llama31-8b-fp8-rtx5090-trtllm4275": (
        "meta-llama/Llama-3.1-8B",
        {"kv_cache_dtype": "fp8"},
    ),
    "trtllm-qwen15-7b-a100-40gb-trtllm2268": (QWEN15_7B, {"block_size": 64}),
    "trtllm-tinyllama-tp2-disagg-dynamo-readme": (TINYLLAMA, {"tensor_parallel_size": 2}),
    "trtllm-llama2-7b-a10-old-trtllm224": (LLAMA2_7B, {"block_size": 16}),
}


def run(fixture_id: str, **override: Any) -> ReconcileResult:
    fixture = FIXTURES[fixture_id]
    model, settings = INPUTS[fixture_id]
    body: dict[str, Any] = {
        "log": "\n".join(fixture["log_lines"]),
        "model": model,
        "engine": ENGINE[fixture["engine"]],
        "settings": settings,
    }
    body.update(override)
    return reconcile(ReconcileRequest.model_validate(body))


def check(result: ReconcileResult, figure: str, index: int = 0) -> Check:
    return [c for c in result.checks if c.figure == figure][index]


def test_every_fixture_has_inputs() -> None:
    assert set(INPUTS) == set(FIXTURES)


# ---- Acceptance: every vLLM v1 fixture with a known config ---------------------------------

V1_KNOWN = [
    fid
    for fid, f in FIXTURES.items()
    if f["engine"] == "vllm" and fid.startswith("vllm-v1") and "kimi" not in fid
]


@pytest.mark.parametrize("fixture_id", V1_KNOWN)
def test_v1_fixtures_reconcile_or_explain(fixture_id: str) -> None:
    result = run(fixture_id)
    assert result.checks
    for c in result.checks:
        if c.status == "different":
            assert c.reason, c
        elif c.status == "not_recomputable":
            assert c.reason, c
        else:
            assert c.status in ("equal", "consistent")


def test_acceptance_counts() -> None:
    # 9 vLLM v1 fixtures with a known config: 16 figures, none different without a reason.
    statuses: dict[str, int] = {}
    for fid in V1_KNOWN:
        for c in run(fid).checks:
            key = "explained" if c.status == "different" and c.reason else c.status
            statuses[key] = statuses.get(key, 0) + 1
    assert len(V1_KNOWN) == 9
    assert statuses == {"equal": 6, "consistent": 5, "explained": 4, "not_recomputable": 1}


# ---- Per fixture: the fixture's own numbers ---------------------------------------------------

# A recomputed figure and the window the log's display rounding admits (blocks; SGLang: tokens).
WINDOWS = [
    # "floor(6.51*2^30 / 2,621,440) = 2,666 blocks -> 42,656 tokens"; "±0.005 GiB display
    # rounding allows 2,664..2,668".
    ("vllm-v1-qwen3-14b-lmcache1739", "gpu_kv_cache_tokens", "equal", 42656, [2664, 2668]),
    # floor(10.55*2^30/786,432) = 14,404 -> 230,464; window 14,397..14,411.
    (
        "vllm-v1-fp8kv-mml100k-vllm25350",
        "gpu_kv_cache_tokens",
        "consistent",
        230464,
        [14397, 14411],
    ),
    # floor(18.78*2^30/1,835,008) = 10,988 -> 175,808; logged 175,856 (10,991), window
    # 10,986..10,991: the top of the window.
    (
        "vllm-v1-qwen3-1p7b-24gb-vllm33263",
        "gpu_kv_cache_tokens",
        "consistent",
        175808,
        [10986, 10991],
    ),
    # 28,950 blocks -> 463,200 tokens; logged 463,136 (28,946); window 28,946..28,954: the
    # bottom of the window.
    (
        "vllm-v1-granite4-micro-fp8-l40s-ibmcodeengine",
        "gpu_kv_cache_tokens",
        "consistent",
        463200,
        [28946, 28954],
    ),
    # 1,950 blocks (log 1,952; window 1,948..1,953).
    ("vllm-v0-llama31-8b-3090-20k-vllm10517", "num_gpu_blocks", "consistent", 1950, [1948, 1953]),
    # 1,479 blocks (log 1,478, window 1,477..1,482).
    (
        "vllm-v0-llama31-8b-3090-29k-error-vllm10517",
        "num_gpu_blocks",
        "consistent",
        1479,
        [1477, 1482],
    ),
    # rest = 6.09 - 21.63*(1-0.85) = 2.8455 GiB -> 46,620 tokens (log 46,611, window
    # 46,526..46,714).
    (
        "sglang-qwq32b-tp4-l4-llms-in-clouds",
        "max_total_num_tokens",
        "consistent",
        46620,
        [46526, 46714],
    ),
    # ceil(0.9 x 17.83 GiB / 2 MiB) = 8,217 (log 8,219; window 8,214..8,219).
    (
        "trtllm-llama31-8b-fp8-rtx5090-trtllm4275",
        "primary_blocks",
        "consistent",
        8217,
        [8214, 8219],
    ),
]


@pytest.mark.parametrize(("fixture_id", "figure", "status", "predicted", "window"), WINDOWS)
def test_figure_and_its_rounding_window(
    fixture_id: str, figure: str, status: str, predicted: int, window: list[int]
) -> None:
    c = check(run(fixture_id), figure)
    assert (c.status, c.predicted, c.blocks_range) == (status, predicted, window)


# Figures the fixture's notes recompute to the digit the log prints (or say cannot be).
STATUSES = [
    # "1,381 / 128 = 10.789 -> 10.79x (exact)".
    ("vllm-v1early-llama31-70b-w8a8-pr12569", "max_concurrency", "equal"),
    # "14,408/cdiv(100,000,16)=6,250 = 2.305 -> 2.31x": consistent with the logged blocks.
    ("vllm-v1-fp8kv-mml100k-vllm25350", "max_concurrency", "consistent"),
    # 28,950 blocks: 3.53x.
    ("vllm-v1-granite4-micro-fp8-l40s-ibmcodeengine", "max_concurrency", "equal"),
    # kv_cache_size 3.81 (matches); CPU 2,048 exact; 1.56x.
    ("vllm-v0-llama31-8b-3090-20k-vllm10517", "kv_cache_size_gib", "equal"),
    ("vllm-v0-llama31-8b-3090-20k-vllm10517", "num_cpu_blocks", "equal"),
    ("vllm-v0-llama31-8b-3090-20k-vllm10517", "max_concurrency", "equal"),
    # tokens 1,478*16 = 23,648 exact.
    ("vllm-v0-llama31-8b-3090-29k-error-vllm10517", "kv_max_tokens", "equal"),
    # "K size = 367,404 x 94 x 1 x 128 x 2 B / 2^30 = 8.234 -> '8.23 GB'".
    ("sglang-qwen3-235b-fp8-tp4-vllm21348", "k_size_gib", "equal"),
    ("sglang-qwen3-235b-fp8-tp4-vllm21348", "v_size_gib", "equal"),
    # K size 1.42 exact.
    ("sglang-qwq32b-tp4-l4-llms-in-clouds", "k_size_gib", "equal"),
    # 101.95 exact; no avail-mem lines, so no token count.
    ("sglang-qwen3-30b-a3b-fp8-mi355-pr18263", "k_size_gib", "equal"),
    ("sglang-qwen3-30b-a3b-fp8-mi355-pr18263", "max_total_num_tokens", "not_recomputable"),
    # 263,008 tokens exact; 16.05 GiB exact.
    ("trtllm-llama31-8b-fp8-rtx5090-trtllm4275", "allocated_tokens", "equal"),
    ("trtllm-llama31-8b-fp8-rtx5090-trtllm4275", "allocated_gib", "equal"),
    # "with tokens_per_block 64 ... ceil(630.43) = 631 (C++ ceilDiv)".
    ("trtllm-qwen15-7b-a100-40gb-trtllm2268", "primary_blocks", "equal"),
    # per-rank 11,264 B/token; 1,800,032 x 11,264 = 18.88 GiB exact.
    ("trtllm-tinyllama-tp2-disagg-dynamo-readme", "allocated_gib", "equal"),
]


@pytest.mark.parametrize(("fixture_id", "figure", "status"), STATUSES)
def test_figure_status(fixture_id: str, figure: str, status: str) -> None:
    assert check(run(fixture_id), figure).status == status


def test_qwen3_14b_concurrency_counts_resident_requests() -> None:
    # "2,666 / 2,048 -> 1.30x"; the null block leaves 2,665 // 2,048 = 1 resident request.
    conc = check(run("vllm-v1-qwen3-14b-lmcache1739"), "max_concurrency")
    assert (conc.status, conc.predicted) == ("equal", 1.3)
    assert "1 requests" in conc.arithmetic


def test_qwen3_235b_tp4_min_over_workers() -> None:
    # expected 11,308 blocks -> 180,928 tokens; window 11,301..11,315; logged 178,880.
    c = check(run("vllm-v1-qwen3-235b-fp8-tp4-vllm21348"), "gpu_kv_cache_tokens")
    assert c.predicted == 180928 and c.blocks_range == [11301, 11315]
    assert c.status == "different" and c.difference == -2048
    assert c.difference_pct == pytest.approx(-1.132, abs=0.001)
    assert c.reason is not None and "minimum over its 4 workers" in c.reason


def test_fp8_221k_error_line() -> None:
    # needed 10.117 GiB -> '10.12' (exact); estimate 7,632 blocks -> 122,112 (log 122,080).
    r = run("vllm-v1-fp8kv-mml221k-error-vllm25350")
    needed = check(r, "kv_needed_gib")
    assert needed.status == "equal" and needed.predicted == pytest.approx(10.117, abs=5e-4)
    estimate = check(r, "estimated_max_model_len")
    assert (estimate.status, estimate.predicted) == ("consistent", 122112)


def test_early_v1_blocks_only() -> None:
    # "implied KV memory ... = 6.74 GiB".
    blocks = check(run("vllm-v1early-llama31-70b-w8a8-pr12569"), "num_gpu_blocks")
    assert blocks.status == "not_recomputable" and blocks.predicted is None
    assert blocks.reason is not None and "6.74 GiB" in blocks.reason


def test_kimi_linear_reconciles() -> None:
    # Logged: 2.30 GiB, "Add 1 padding layers, may waste at most 5.00%", "GPU KV cache size:
    # 75,840 tokens", "Maximum concurrency for 120,000 tokens per request: 2.48x". The fixture's
    # own arithmetic: 7 MLA + 20 KDA layers -> group size 7, KDA in 3 groups, 1 padding layer.
    r = run("vllm-v1-kimi-linear-awq-tp2-3090-vllm28228")
    assert check(r, "padding_layers").status == "equal"
    tokens = check(r, "gpu_kv_cache_tokens")
    assert tokens.status == "equal" and tokens.predicted == 75840
    conc = check(r, "max_concurrency")
    assert conc.status in ("equal", "consistent")  # 2.30 GiB admits 318 or 319 blocks
    assert r.plan_request is not None
    planned = plan(PlanRequest.model_validate(r.plan_request))
    assert planned.capacity is not None
    assert planned.capacity.engine_reported_tokens == 75840
    # 318 blocks (the low end of the 2.30 GiB window) give the logged 2.48x exactly.
    low = plan(PlanRequest.model_validate({**r.plan_request, "kv_budget_bytes": 318 * 7741440}))
    assert low.capacity is not None
    assert low.capacity.engine_reported_concurrency == 2.48
    without = run("vllm-v1-kimi-linear-awq-tp2-3090-vllm28228", model=None)
    assert all("no model" in (c.reason or "") for c in without.checks)


def test_kimi_linear_state_rules_between_releases_refused() -> None:
    # vLLM 0.12-0.13's hybrid sizing is not checked against their own code (0.14 and newer's
    # is): the figures are left unrecomputed with that reason, never a guess.
    r = run(
        "vllm-v1-kimi-linear-awq-tp2-3090-vllm28228",
        settings={"tensor_parallel_size": 2, "engine_version": "0.13"},
    )
    assert {c.status for c in r.checks} == {"not_recomputable"}
    assert all("0.11" in (c.reason or "") and "0.33" in (c.reason or "") for c in r.checks)


def test_granite_published_config_reconciles() -> None:
    # A granite-4.0-micro config as published (granitemoehybrid, layer_types "attention") is
    # the dense model: the same 28,950 blocks as the fixture's own arithmetic.
    r = run(
        "vllm-v1-granite4-micro-fp8-l40s-ibmcodeengine",
        model=GRANITE_MICRO_PUBLISHED,
        settings={"gpu": "L40S-48GB", "gpu_memory_utilization": 0.9},
    )
    assert r.plan_request is not None
    planned = plan(PlanRequest.model_validate(r.plan_request))
    assert planned.capacity is not None and planned.capacity.num_blocks == 28950
    assert check(r, "max_concurrency").status == "equal"


def test_granite_reserves_round_trip() -> None:
    # Learned: weights 3.4244 GiB per rank, KV 35.34 GiB; a plan of the same deployment gets
    # the same budget back, hence the same 28,950 blocks.
    r = run(
        "vllm-v1-granite4-micro-fp8-l40s-ibmcodeengine",
        settings={"gpu": "L40S-48GB", "gpu_memory_utilization": 0.9},
    )
    assert r.reserves is not None and r.reserves.weights_bytes == round(3.4244 * (1 << 30))
    assert r.reserves.kv_budget_bytes == round(35.34 * (1 << 30))
    assert r.reserves.cuda_graph_bytes == round(0.72 * (1 << 30))
    assert r.plan_request is not None
    planned = plan(PlanRequest.model_validate(r.plan_request))
    assert planned.capacity is not None
    assert planned.capacity.kv_budget_bytes == r.reserves.kv_budget_bytes
    assert planned.capacity.num_blocks == 28950


def test_pipeline_stage_with_more_layers() -> None:
    # "needed = 16,384 blocks x (32,768 B x 48 layers) = 24.0 GiB - the check charges ALL 48
    # layers against one PP worker's memory"; estimate 2,170 blocks -> 34,720 (log 34,736);
    # "Per-stage (32 layers) it would be 52,096".
    r = run("vllm-v1-qwen3-coder-30b-fp8-pp2-uneven-error-vllm34076")
    needed = check(r, "kv_needed_gib")
    assert needed.predicted == pytest.approx(16.0)  # the 32-layer stage
    assert needed.status == "different" and "all 48 layers" in (needed.reason or "")
    estimate = check(r, "estimated_max_model_len")
    assert estimate.predicted == 52096
    assert estimate.status == "different" and "vllm#34076" in (estimate.reason or "")


def test_gpt_oss_eagle_padding_before_and_after() -> None:
    # Before PR #29303: 17 padding layers, 89.47%; after: 1 layer, 5.56%.
    r = run("vllm-v1-gptoss120b-eagle3-padding-pr29303")
    before, after = check(r, "padding_layers", 0), check(r, "padding_layers", 1)
    assert (after.status, after.predicted) == ("equal", 1)
    assert before.status == "different" and "#29303" in (before.reason or "")
    # Without the draft layer the draft itself is the explanation.
    bare = run("vllm-v1-gptoss120b-eagle3-padding-pr29303", settings={})
    assert all("draft" in (c.reason or "") for c in bare.checks)


def test_v0_log_format_and_swap_blocks() -> None:
    # CPU 2,048 exact: 4 GiB of swap in 2 MiB blocks.
    r = run("vllm-v0-llama31-8b-3090-20k-vllm10517")
    assert r.log_format == "vLLM v0"
    assert check(r, "num_cpu_blocks").predicted == 2048


def test_v0_error_log_learns_the_reserve() -> None:
    r = run("vllm-v0-llama31-8b-3090-29k-error-vllm10517")
    assert r.reserves is not None and r.reserves.reserve_bytes is not None


@pytest.mark.parametrize(
    ("fixture_id", "implied"),
    [
        ("vllm-v0-r1-distill-qwen14b-tp2-4090-vllm13061", "7.46 GiB"),
        ("vllm-v0-gemma3-27b-awq-a10g-error-vllm16199", "1.70 GiB"),
    ],
)
def test_v0_error_without_memory_says_what_is_implied(fixture_id: str, implied: str) -> None:
    c = check(run(fixture_id), "kv_max_tokens")
    assert c.status == "not_recomputable" and c.predicted is None
    assert implied in (c.reason or "")


def test_sglang_tokens_need_the_avail_mem_lines() -> None:
    # "Token count not recomputable (no avail-mem lines)."
    tokens = check(run("sglang-qwen3-235b-fp8-tp4-vllm21348"), "max_total_num_tokens")
    assert tokens.status == "not_recomputable" and "Load weight begin" in (tokens.reason or "")


def test_trtllm_qwen15_default_block_size_explains() -> None:
    # "With 32 it would be 1,261."
    default = check(run("trtllm-qwen15-7b-a100-40gb-trtllm2268", settings={}), "primary_blocks")
    assert (default.status, default.predicted) == ("different", 1261)
    assert "tokens_per_block 64" in (default.reason or "")


def test_trtllm_old_log_rounds_up() -> None:
    # "not a multiple of 16 - allocation rounds up to cdiv(10,718,16)=670 blocks = 10,720".
    c = check(run("trtllm-llama2-7b-a10-old-trtllm224"), "kv_tokens")
    assert c.status == "not_recomputable" and "10,720 tokens" in (c.reason or "")


# ---- Inputs -----------------------------------------------------------------------------------


def test_wrong_engine_is_a_field_error() -> None:
    with pytest.raises(FieldError) as info:
        run("vllm-v1-qwen3-14b-lmcache1739", engine="sglang")
    assert info.value.problems[0].field == "engine"
    assert "vLLM log" in info.value.detail


def test_unrecognised_log() -> None:
    with pytest.raises(FieldError) as info:
        reconcile(ReconcileRequest(log="hello\nINFO vllm started\n"))
    assert "no KV-cache start-up line" in info.value.detail
    assert "vLLM" in info.value.detail


def test_model_named_in_the_log() -> None:
    log = (
        "INFO non-default args: {'model': 'meta-llama/Llama-3.1-8B', 'max_model_len': 8192}\n"
        "Available KV cache memory: 40.00 GiB\n"
        "GPU KV cache size: 327,680 tokens\n"
        "Maximum concurrency for 8,192 tokens per request: 40.00x\n"
    )
    # engine_rules.md §6.2: Llama-3.1-8B, 40 GiB: 20,480 blocks, 327,680 tokens, 8k: 40.00x
    # (39 resident).
    r = reconcile(ReconcileRequest(log=log))
    assert r.model == "meta-llama/Llama-3.1-8B"
    assert [c.status for c in r.checks] == ["equal", "equal"]
    assert "39 requests" in check(r, "max_concurrency").arithmetic


def test_hybrid_tokens_divide_by_groups() -> None:
    # engine_rules.md §6.2 Gemma-3-27B, 40 GiB: 7 groups, 32,768 blocks, log 74,896 tokens;
    # 32k: 5.95x.
    log = (
        "Available KV cache memory: 40.00 GiB\n"
        "GPU KV cache size: 74,896 tokens\n"
        "Maximum concurrency for 32,768 tokens per request: 5.95x\n"
    )
    r = reconcile(ReconcileRequest(log=log, model="google/gemma-3-27b-it"))
    assert [c.status for c in r.checks] == ["equal", "equal"]
    assert any("7 KV-cache groups" in n for n in r.notes)


def test_several_workers_take_the_minimum() -> None:
    log = (
        "(Worker_TP0 pid=1) Available KV cache memory: 40.00 GiB\n"
        "(Worker_TP1 pid=2) Available KV cache memory: 39.00 GiB\n"
        "GPU KV cache size: 319,488 tokens\n"
    )
    # Llama-3.1-8B blocks are 2 MiB (engine_rules.md §6.2: 40 GiB -> 20,480); vLLM uses the
    # smaller worker: 39 GiB -> 19,968 blocks -> 319,488 tokens.
    r = reconcile(ReconcileRequest(log=log, model="meta-llama/Llama-3.1-8B"))
    assert check(r, "gpu_kv_cache_tokens").status == "equal"
    assert any("smallest" in n for n in r.notes)


def test_settings_errors_name_the_settings_field() -> None:
    with pytest.raises(FieldError) as info:
        run("vllm-v1-qwen3-14b-lmcache1739", settings={"tensor_parallel_size": 3})
    assert info.value.problems[0].loc[0] == "settings"


def test_repeated_lines_are_bounded() -> None:
    # A log of many restarts: work and output stay bounded, and the result says so.
    log = "\n".join(f"GPU KV cache size: {1000 + i:,} tokens" for i in range(500))
    r = reconcile(
        ReconcileRequest(
            log="Available KV cache memory: 1.00 GiB\n" + log, model="meta-llama/Llama-3.1-8B"
        )
    )
    assert len(r.checks) == 32 and len(r.lines) == 33
    assert any("468 repeated line(s)" in note for note in r.notes)


# ---- Every note has a code ------------------------------------------------------------------


def coded(r: ReconcileResult) -> dict[str, dict[str, Any]]:
    """code -> params of each note, after checking every note text comes from its code."""
    assert [d.text for d in r.notes_detail] == r.notes  # no note left without a code
    for d in r.notes_detail:
        assert TEMPLATES[d.code].format(**d.params) == d.text
    return {d.code: dict(d.params) for d in r.notes_detail}


@pytest.mark.parametrize("fixture_id", sorted(FIXTURES))
def test_fixture_notes_have_codes(fixture_id: str) -> None:
    r = run(fixture_id)
    assert r.notes
    coded(r)


def test_log_quirks_are_coded_notes() -> None:
    # A vLLM log from a release older than the rules cover, an over-long line, an SGLang line
    # and Gemma-3's seven KV-cache groups (engine_rules.md §6.2), each raising its own note.
    log = (
        "INFO vLLM API server version 0.1.0\n"
        + "x" * (MAX_LINE_CHARS + 1)
        + "\nAvailable KV cache memory: 40.00 GiB\n"
        "GPU KV cache size: 74,896 tokens\n"
        "Maximum concurrency for 32,768 tokens per request: 5.95x\n"
        "[2025-01-01 00:00:00 TP0] KV Cache is allocated. #tokens: 1000, K size: 1.00 GB, "
        "V size: 1.00 GB\n"
    )
    r = reconcile(ReconcileRequest(log=log, model="google/gemma-3-27b-it", engine="vllm"))
    codes = coded(r)
    assert codes["reconcile.version_outside_rules"]["named"] == "0.1.0"
    assert codes["reconcile.other_engine_lines"] == {"lines": 1}
    assert codes["reconcile.lines_truncated"] == {"lines": 1}
    # 0.1.0 takes the oldest rules, 0.9.0's, which have no hybrid KV-cache manager (every layer
    # full length, one group); from 0.9.1 Gemma-3 has seven groups.
    assert "reconcile.vllm.hybrid_tokens_divided" not in codes
    r = reconcile(
        ReconcileRequest(
            log=log.replace("version 0.1.0", "version 0.9.2"),
            model="google/gemma-3-27b-it",
            engine="vllm",
        )
    )
    assert coded(r)["reconcile.vllm.hybrid_tokens_divided"] == {"groups": 7}
    # The English text is the contract: byte-identical to what the answer said before codes.
    assert (
        "'GPU KV cache size' divides num_blocks by the 7 KV-cache groups of this hybrid model: "
        "it is not the tokens one request can hold." in r.notes
    )


@pytest.mark.parametrize(
    ("line", "code", "text"),
    [
        (
            "(Worker pid=1) INFO [gpu_worker.py:436] Available KV cache memory: 40.00 GiB",
            "reconcile.vllm.version_from_line_numbers_of_several",
            "vLLM 0.19 rules, inferred from its line numbers (gpu_worker.py:436), which releases "
            "0.19, 0.19.1 all print: 0.19 is assumed, the first release of the newest minor line "
            "among them.",
        ),
        (
            "INFO [kv_cache_utils.py:634] GPU KV cache size: 327,680 tokens",
            "reconcile.vllm.version_from_separate_lines",
            "vLLM 0.19 rules assumed: the log names no release and prints no line numbers kvplan "
            "knows; its KV-size line apart from the concurrency is printed by every release from "
            "0.9 to 0.27 (give engine_version to be sure).",
        ),
    ],
    ids=["line-numbers", "separate-lines"],
)
def test_inferred_version_is_a_coded_note(line: str, code: str, text: str) -> None:
    # The release a log without a version line came from: gpu_worker.py:436 is the "Available
    # KV cache memory" line of vLLM 0.19.0 and 0.19.1 (their wheels); kv_cache_utils.py:634 is
    # no 0.9–0.33 release's, and a KV-size line without the concurrency predates 0.28.
    r = reconcile(ReconcileRequest(log=line + "\n", model="meta-llama/Llama-3.1-8B"))
    assert r.engine_version == "0.19"
    assert code in coded(r)
    assert text in r.notes


@pytest.mark.parametrize(
    ("log", "model", "code"),
    [
        (
            "INFO non-default args: {'model': 'meta-llama/Llama-3.1-8B'}\n"
            "Available KV cache memory: 40.00 GiB\nGPU KV cache size: 327,680 tokens\n",
            None,
            "reconcile.model_from_log",
        ),
        (
            "(Worker_TP0 pid=1) Available KV cache memory: 40.00 GiB\n"
            "(Worker_TP1 pid=2) Available KV cache memory: 39.00 GiB\n"
            "GPU KV cache size: 319,488 tokens\n",
            "meta-llama/Llama-3.1-8B",
            "reconcile.vllm.workers_differ",
        ),
        (
            "Available KV cache memory: 1.00 GiB\n"
            + "\n".join(f"GPU KV cache size: {1000 + i:,} tokens" for i in range(40)),
            "meta-llama/Llama-3.1-8B",
            "reconcile.lines_capped",
        ),
    ],
    ids=["model-from-log", "workers", "repeated"],
)
def test_reconcile_notes_are_coded(log: str, model: str | None, code: str) -> None:
    r = reconcile(ReconcileRequest(log=log, model=model))
    assert code in coded(r)


# ---- vLLM rules shared with plan(): pipeline stages and the hybrid-manager switch --------------

GEMMA3_PP4_LOG = (
    "INFO non-default args: {'model': 'google/gemma-3-27b-it', 'pipeline_parallel_size': 4}\n"
    "Available KV cache memory: 40.00 GiB\n"
    "WARNING Add 8 padding layers, may waste at most 15.38% KV cache memory\n"
    "GPU KV cache size: 249,648 tokens\n"
    "Maximum concurrency for 8,192 tokens per request: 30.43x\n"
)


def test_vllm_pipeline_stages_project_whole_model_groups() -> None:
    # vllm/v1/core/kv_cache_utils.py get_kv_cache_configs: the groups are built ONCE from the
    # whole model and projected on each stage (_project_kv_cache_groups_to_worker); a stage's
    # block costs page x its largest projected group; every stage takes the smallest count.
    # Gemma-3-27B: 62 layers, full at 5, 11, ..., 59 (10), 52 sliding (W 1,024); page per layer
    # 16 x 16 KV heads x (128 + 128) x 2 B = 131,072 B. Whole model: group_size 10 (52 >= 1.5 x
    # 10), sliding split 6 ways -> 7 groups; 52 % 10 = 2 -> "Add 8 padding layers" 8 / 52 =
    # 15.38% (engine_rules.md §6.2). get_pp_indices(62, 4): stages of 15, 16, 16, 15; stage 0
    # holds sliding[0::6] = 3 layers -> 40 GiB / (131,072 x 3) = 109,226 blocks (no stage has a
    # group larger than 3). "GPU KV cache size" 109,226 // 7 x 16 = 249,648 tokens. 8,192-token
    # request: 1 full group cdiv(8,192, 16) = 512 + 6 sliding groups cdiv(min(1,023 + 8,192,
    # 8,192), 16) + 1 = 513 -> 3,590 blocks; 109,226 / 3,590 = 30.425 -> 30.43x.
    # Grouping each stage alone (the old rule) would give stage 1 (3 full + 13 sliding, groups
    # of 3) 6 groups: 291,264 tokens, 35.50x, and 2 padding layers.
    r = reconcile(ReconcileRequest(log=GEMMA3_PP4_LOG))
    tokens, conc = check(r, "gpu_kv_cache_tokens"), check(r, "max_concurrency")
    padding = check(r, "padding_layers")
    assert (tokens.status, tokens.predicted) == ("equal", 249648)
    assert (conc.status, conc.predicted) == ("equal", 30.43)
    assert (padding.status, padding.predicted) == ("equal", 8)
    # plan() of the same deployment prints the same figures.
    planned = plan(
        PlanRequest(
            model="google/gemma-3-27b-it",
            context_tokens=8192,
            kv_budget_bytes=40 * (1 << 30),
            pipeline_parallel_size=4,
            engine_version=r.engine_version,
        )
    )
    assert planned.capacity is not None
    assert planned.capacity.engine_reported_tokens == tokens.predicted
    assert planned.capacity.engine_reported_concurrency == conc.predicted
    # ... and so does the plan request reconcile hands back.
    assert r.plan_request is not None
    again = plan(PlanRequest.model_validate(r.plan_request)).capacity
    assert again is not None
    assert (again.num_blocks, again.engine_reported_tokens) == (109226, 249648)
    assert again.engine_reported_concurrency == 30.43


MISTRAL_LOG = (
    "Available KV cache memory: 40.00 GiB\n"
    "GPU KV cache size: 327,680 tokens\n"
    "Maximum concurrency for 8,192 tokens per request: 39.92x\n"
)


@pytest.mark.parametrize("how", ["request", "log"])
def test_vllm_disable_hybrid_keeps_window_when_all_layers_slide(how: str) -> None:
    # kv_cache_utils.py unify_hybrid_kv_cache_specs returns at once when the specs are already
    # uniform: Mistral-7B-v0.1 (32 layers, all W 4,096) keeps its SlidingWindowSpec with
    # --disable-hybrid-kv-cache-manager. Page 16 x 8 KV heads x (128 + 128) x 2 B = 65,536 B x
    # 32 layers = 2 MiB per block -> 40 GiB / 2 MiB = 20,480 blocks -> 327,680 tokens (one
    # group). 8,192-token request: cdiv(min(4,095 + 8,192, 8,192), 16) + 1 = 513 blocks ->
    # 20,480 / 513 = 39.922 -> 39.92x (engine_rules.md §6.2; every layer full length would be
    # 512 -> 40.00x).
    if how == "log":
        args = "{'model': 'mistralai/Mistral-7B-v0.1', 'disable_hybrid_kv_cache_manager': True}"
        req = ReconcileRequest(log=f"INFO non-default args: {args}\n" + MISTRAL_LOG)
    else:
        req = ReconcileRequest.model_validate(
            {
                "log": MISTRAL_LOG,
                "model": "mistralai/Mistral-7B-v0.1",
                "settings": {"hybrid_kv_cache_manager": False},
            }
        )
    r = reconcile(req)
    assert any(u.name == "hybrid_kv_cache_manager" and u.value == "False" for u in r.settings)
    tokens, conc = check(r, "gpu_kv_cache_tokens"), check(r, "max_concurrency")
    assert (tokens.status, tokens.predicted) == ("equal", 327680)
    assert (conc.status, conc.predicted) == ("equal", 39.92)
    planned = plan(
        PlanRequest(
            model="mistralai/Mistral-7B-v0.1",
            context_tokens=8192,
            kv_budget_bytes=40 * (1 << 30),
            hybrid_kv_cache_manager=False,
            engine_version=r.engine_version,
        )
    )
    assert planned.capacity is not None
    assert planned.capacity.engine_reported_tokens == tokens.predicted
    assert planned.capacity.engine_reported_concurrency == conc.predicted
    assert r.plan_request is not None and r.plan_request["hybrid_kv_cache_manager"] is False
    again = plan(PlanRequest.model_validate(r.plan_request)).capacity
    assert again is not None and again.engine_reported_concurrency == 39.92


def test_vllm_disable_hybrid_unifies_a_mixed_model() -> None:
    # The other branch of unify_hybrid_kv_cache_specs: Gemma-3-27B mixes sliding and full
    # layers, so every layer becomes full attention, one group of 62 layers: 40 GiB /
    # (131,072 x 62) = 5,285 blocks -> 84,560 tokens; 32,768 tokens = 2,048 blocks ->
    # 5,285 / 2,048 = 2.58x (engine_rules.md §6.2, Gemma-3-27B "Without hybrid manager").
    log = (
        "Available KV cache memory: 40.00 GiB\n"
        "GPU KV cache size: 84,560 tokens\n"
        "Maximum concurrency for 32,768 tokens per request: 2.58x\n"
    )
    r = reconcile(
        ReconcileRequest.model_validate(
            {
                "log": log,
                "model": "google/gemma-3-27b-it",
                "settings": {"hybrid_kv_cache_manager": False},
            }
        )
    )
    assert [(c.status, c.predicted) for c in r.checks] == [("equal", 84560), ("equal", 2.58)]


def test_the_two_lines_people_grep_give_the_budget_and_what_fits() -> None:
    # "GPU KV cache size: 410,128 tokens" and "Maximum concurrency for 131,072 tokens per
    # request: 3.13x" (vLLM 0.19 era, Llama-3.1-8B): 410,128 / 16 = 25,633 blocks of
    # 16 × 131,072 B; the null block kept back, 25,632 // 8,192 = 3 requests of 131,072 fit.
    log = (
        "INFO [kv_cache_utils.py:1087] GPU KV cache size: 410,128 tokens\n"
        "INFO [kv_cache_utils.py:1091] Maximum concurrency for 131,072 tokens per request: 3.13x\n"
    )
    r = reconcile(ReconcileRequest(log=log, model="meta-llama/Llama-3.1-8B"))
    assert r.reserves is not None and r.reserves.kv_budget_bytes == 25633 * 16 * 131072
    assert r.plan_request is not None
    planned = plan(PlanRequest.model_validate(r.plan_request))
    assert planned.capacity is not None
    assert (planned.capacity.num_blocks, planned.capacity.max_requests) == (25633, 3)
    assert planned.capacity.engine_reported_concurrency == 3.13
