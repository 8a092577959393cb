"""More real start-up logs (tests/fixtures/engine_logs_more.jsonl, issues #20 and #21), each
reconciled through the service with the settings its thread states.

Every expected figure is the log's own printed value (`log_lines`, restated in
`recomputed.logged`), never kvplan's output: a figure reproduces when kvplan's recomputation,
printed with the log's digits, is the logged figure (equal), or the log's display rounding admits
it (consistent). A figure kvplan does not reproduce is an xfail(strict=True) with its class, so a
fix flips it; a figure the log lacks the lines for is a refusal with the reason it gives.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.core.logs.parse import parse_log
from planner.core.reconcile_schema import Check, ReconcileRequest, ReconcileResult
from planner.service import reconcile

FIXTURES_FILE = Path(__file__).resolve().parents[1] / "fixtures" / "engine_logs_more.jsonl"
FIXTURES: dict[str, dict[str, Any]] = {
    d["id"]: d
    for d in (json.loads(x) for x in FIXTURES_FILE.read_text("utf-8").splitlines() if x.strip())
}
ENGINE = {"vllm": "vllm", "sglang": "sglang"}

# The flags each thread states (non-default args lines, commands), as reconcile settings.
_CLUB_612 = {
    "max_model_len": 131072,
    "kv_cache_dtype": "fp8",
    "max_num_batched_tokens": 8192,
    "enable_prefix_caching": True,
}
_CLUB_294 = {
    "tensor_parallel_size": 2,
    "max_model_len": 262144,
    "kv_cache_dtype": "fp8_e5m2",
    "max_num_batched_tokens": 8192,
    "enable_prefix_caching": True,
}

# fixture id -> (model, settings)
INPUTS: dict[str, tuple[str | None, dict[str, Any]]] = {
    "vllm0240-qwen36-35b-a3b-nvfp4-fp8kv-5090-club3090-612": ("Qwen/Qwen3.6-35B-A3B", _CLUB_612),
    "vllm0240-qwen36-35b-a3b-nvfp4-fp8kv-5090-club3090-652": ("Qwen/Qwen3.6-35B-A3B", _CLUB_612),
    "vllm0190-qwen35-27b-h20-vllm40691": (
        "Qwen/Qwen3.5-27B",
        {"max_model_len": 32768, "max_num_batched_tokens": 16384, "engine_version": "0.19"},
    ),
    # Lines dated 10-11 (Oct 2025) at kv_cache_utils.py:1199/1204, no release's line numbers
    # (0.11.0 prints them at 1087/1091, 0.11.1 at 1229/1234): a build on the way to 0.11.1,
    # whose hybrid rules are 0.11's (the same assumption as vllm#28228 in engine_logs.jsonl).
    "vllm-qwen3next-80b-int4-tp2-fp8e5m2-vllm26646": (
        "Qwen/Qwen3-Next-80B-A3B-Instruct",
        {
            "tensor_parallel_size": 2,
            "max_model_len": 215040,
            "kv_cache_dtype": "fp8_e5m2",
            "engine_version": "0.11",
        },
    ),
    "vllm-v1-gpu-blocks-format-pr13596": (None, {"max_model_len": 2048, "vllm_engine": "v1"}),
    "vllm-v1-tokens-format-pr13596": (None, {"max_model_len": 2048, "vllm_engine": "v1"}),
    "vllm-qwen38-27b-fp8-tp2-3090-mitchross1995": (
        None,
        {"tensor_parallel_size": 2, "max_model_len": 131072, "kv_cache_dtype": "fp8_e4m3"},
    ),
    "vllm-qwen38-27b-fp8-2x5090-club3090-1086": (None, {"max_model_len": 65536}),
    # The args line is cut inside speculative_config: the draft is unknown, none is passed.
    "vllm0240-qwen36-27b-fp8-tp2-fp8kv-dualmax-club3090-pr594": (
        "Qwen/Qwen3.6-27B",
        {**_CLUB_294, "kv_cache_dtype": "fp8"},
    ),
    "vllm0201rc1-qwen36-27b-int4-dual4090-dflash-club3090-46": (
        "Qwen/Qwen3.6-27B",
        {"tensor_parallel_size": 2, "max_model_len": 180000, "engine_version": "0.20.1rc1"},
    ),
    "vllm-tt-plugin-gemma4-31b-hybrid-off-ttxla5727": (
        "google/gemma-4-31B-it",
        {"max_model_len": 128, "hybrid_kv_cache_manager": False},
    ),
    "sglang-hybrid-gdn-fp8kv-tp2-5090-club3090-1261": (
        "Qwen/Qwen3.6-27B",
        {"tensor_parallel_size": 2, "kv_cache_dtype": "fp8_e4m3"},
    ),
    "vllm-qwen36-27b-int4-tp2-mtp3-fp8e5m2-3090-club3090-294": ("Qwen/Qwen3.6-27B", _CLUB_294),
    "vllm-qwen36-27b-int4-tp2-mtp3-fp8e5m2-3090-club3090-295": ("Qwen/Qwen3.6-27B", _CLUB_294),
    "sglang-kt-deepseek-v3-bf16-tp2-mla-ktransformers1804": (
        "deepseek-ai/DeepSeek-V3",
        {"tensor_parallel_size": 2, "mem_fraction_static": 0.9},
    ),
    "vllm-v1-deepseek-v2-lite-mla-offload-error-vllm15871": (
        "deepseek-ai/DeepSeek-V2-Lite-Chat",
        {"max_model_len": 32768},
    ),
}


def run(fixture_id: str) -> ReconcileResult:
    fixture = FIXTURES[fixture_id]
    model, settings = INPUTS[fixture_id]
    body: dict[str, Any] = {
        "log": "\n".join(fixture["log_lines"]),
        "engine": ENGINE[fixture["engine"]],
        "settings": settings,
    }
    if model is not None:
        body["model"] = model
    return reconcile(ReconcileRequest.model_validate(body))


def check(result: ReconcileResult, figure: str) -> Check:
    found = [c for c in result.checks if c.figure == figure]
    assert found, (figure, [c.figure for c in result.checks])
    return found[0]


def test_every_fixture_has_inputs_and_a_source() -> None:
    assert set(INPUTS) == set(FIXTURES)
    for f in FIXTURES.values():
        assert f["source"]["url"].startswith("https://") and f["source"]["ref"]
        assert f["log_lines"] and f["recomputed"]["logged"]


@pytest.mark.parametrize("fixture_id", sorted(FIXTURES))
def test_every_line_is_recognised(fixture_id: str) -> None:
    fixture = FIXTURES[fixture_id]
    parsed = parse_log("\n".join(fixture["log_lines"]))
    assert parsed.detected_engine == ENGINE[fixture["engine"]]
    assert len(parsed.facts) >= len(fixture["log_lines"])


# (fixture id, figure, the log's printed value): kvplan reproduces it (equal or consistent).
REPRODUCED = [
    # vLLM 0.24 (its version line), Qwen3.6-35B-A3B, fp8 KV, prefix caching on: 299 blocks,
    # 69 per request (hand: 567,978 / 131,072 = 299 / 69).
    ("vllm0240-qwen36-35b-a3b-nvfp4-fp8kv-5090-club3090-612", "gpu_kv_cache_tokens", 567978),
    ("vllm0240-qwen36-35b-a3b-nvfp4-fp8kv-5090-club3090-612", "max_concurrency", 4.33),
    ("vllm0240-qwen36-35b-a3b-nvfp4-fp8kv-5090-club3090-652", "gpu_kv_cache_tokens", 569878),
    ("vllm0240-qwen36-35b-a3b-nvfp4-fp8kv-5090-club3090-652", "max_concurrency", 4.35),
    # Qwen3-Next TP2 fp8_e5m2 at 0.11's rules: the concurrency from the logged tokens.
    ("vllm-qwen3next-80b-int4-tp2-fp8e5m2-vllm26646", "max_concurrency", 1.66),
    # 0.22 (line numbers): int(max_concurrency × 262,144) = the tokens line, so 2.374 -> 2.37.
    ("vllm-qwen36-27b-int4-tp2-mtp3-fp8e5m2-3090-club3090-294", "max_concurrency", 2.37),
    ("vllm-qwen36-27b-int4-tp2-mtp3-fp8e5m2-3090-club3090-295", "max_concurrency", 2.37),
    # No model (Qwen3.8 is not in the catalog), but 0.27's lines (line numbers) tie them:
    # 214,135 = int(max_concurrency × 65,536), 3.2674 -> 3.27.
    ("vllm-qwen38-27b-fp8-2x5090-club3090-1086", "max_concurrency", 3.27),
    # Gemma-4-31B through Tenstorrent's vLLM plugin, 0.22's lines: 7,584 = int(59.25 × 128).
    ("vllm-tt-plugin-gemma4-31b-hybrid-off-ttxla5727", "max_concurrency", 59.25),
    # MLA: 10,000 × 61 × 576 × 2 B = 0.6545 GiB -> "0.65"; 32,768 × 27 × 576 × 2 B -> "0.95".
    ("sglang-kt-deepseek-v3-bf16-tp2-mla-ktransformers1804", "kv_size_gib", 0.65),
    ("vllm-v1-deepseek-v2-lite-mla-offload-error-vllm15871", "kv_needed_gib", 0.95),
    # SGLang's GDN hybrid (Qwen3.6-27B geometry, TP2, fp8 KV): 454,112 tokens × 16 full-attention
    # layers × 2 KV heads per rank × 256 × 1 B = 3.46 GB of K (engine_logs_more's arithmetic).
    ("sglang-hybrid-gdn-fp8kv-tp2-5090-club3090-1261", "k_size_gib", 3.46),
    # vLLM 0.19.0 (the log says so), Qwen3.5-27B at 32k: 0.19's hybrid rules (the block raised
    # while the config is built, checked against 0.19.1's own code): 32.98x from the blocks the
    # tokens line implies (290,864 = num_blocks // groups × block), within its rounding of 33.04.
    ("vllm0190-qwen35-27b-h20-vllm40691", "max_concurrency", 33.04),
]

# Misses, by class: (fixture id, figure, printed value, class).
NO_MODEL = (
    "no model, and no release kvplan can tell: the log names neither, and only from 0.20.1 "
    "(tokens = int(max_concurrency × max_model_len)) does kvplan tie the two figures without a "
    "model; these are a pre-0.9 V1 log (blocks × 16 / max_model_len) and one whose lines carry "
    "no source line (0.19 assumed)"
)
MISSES = [
    (
        "vllm0201rc1-qwen36-27b-int4-dual4090-dflash-club3090-46",
        "max_concurrency",
        1.06,
        "draft: its DFlash draft is cut from the quote (the container's name says it); without "
        "a draft kvplan predicts 1.75x at 0.20's hybrid rules",
    ),
    (
        "vllm0240-qwen36-27b-fp8-tp2-fp8kv-dualmax-club3090-pr594",
        "gpu_kv_cache_tokens",
        300220,
        "draft: the quoted args are cut inside speculative_config; without the draft kvplan "
        "predicts 334,459 tokens (222 blocks / 174 per request): the draft it ran is unknown",
    ),
    (
        "vllm0240-qwen36-27b-fp8-tp2-fp8kv-dualmax-club3090-pr594",
        "max_concurrency",
        1.15,
        "draft: the speculative_config is cut from the quote (kvplan: 1.28x without a draft)",
    ),
    ("vllm-v1-gpu-blocks-format-pr13596", "max_concurrency", 997.08, NO_MODEL),
    ("vllm-v1-tokens-format-pr13596", "max_concurrency", 997.08, NO_MODEL),
    ("vllm-qwen38-27b-fp8-tp2-3090-mitchross1995", "max_concurrency", 2.31, NO_MODEL),
]


@pytest.mark.parametrize(
    ("fixture_id", "figure", "logged"),
    [*REPRODUCED]
    + [
        pytest.param(fid, fig, val, marks=pytest.mark.xfail(strict=True, reason=why))
        for fid, fig, val, why in MISSES
    ],
)
def test_logged_figure_reproduces(fixture_id: str, figure: str, logged: float) -> None:
    c = check(run(fixture_id), figure)
    assert c.logged == pytest.approx(logged)
    assert c.status in ("equal", "consistent"), (c.status, c.predicted, c.reason)


# Figures the log lacks the lines for: the refusal and its reason, not a number.
NO_AVAILABLE = "reason.no_available_kv_line"
REFUSED = [
    # No "Available KV cache memory" line in the quoted excerpt.
    ("vllm-qwen3next-80b-int4-tp2-fp8e5m2-vllm26646", "gpu_kv_cache_tokens", NO_AVAILABLE),
    (
        "vllm-qwen36-27b-int4-tp2-mtp3-fp8e5m2-3090-club3090-294",
        "gpu_kv_cache_tokens",
        NO_AVAILABLE,
    ),
    ("vllm0190-qwen35-27b-h20-vllm40691", "gpu_kv_cache_tokens", NO_AVAILABLE),
    (
        "vllm-qwen36-27b-int4-tp2-mtp3-fp8e5m2-3090-club3090-295",
        "gpu_kv_cache_tokens",
        NO_AVAILABLE,
    ),
]


@pytest.mark.parametrize(("fixture_id", "figure", "code"), REFUSED)
def test_a_figure_the_log_cannot_give_is_refused_with_its_reason(
    fixture_id: str, figure: str, code: str
) -> None:
    c = check(run(fixture_id), figure)
    assert (c.status, c.predicted, c.reason_code) == ("not_recomputable", None, code)


def test_the_ktransformers_pool_size_needs_the_free_memory_before_weights() -> None:
    # The log has "Load weight end" but not "Load weight begin", and #tokens is the run's own
    # --max-total-tokens 10000: no budget to recompute it from.
    c = check(run("sglang-kt-deepseek-v3-bf16-tp2-mla-ktransformers1804"), "max_total_num_tokens")
    assert c.status == "not_recomputable" and c.logged == 10000 and c.reason


def test_a_0_19_hybrid_is_sized_by_0_19s_rules() -> None:
    # 0.19 hybrids are modelled (issue #20): the log's release is read, and no figure is refused
    # for the release; the tokens need the "Available" line the excerpt lacks.
    r = run("vllm0190-qwen35-27b-h20-vllm40691")
    assert r.engine_version == "0.19"
    assert all(c.reason_code != "vllm.state_release_unmodelled" for c in r.checks)
    assert check(r, "max_concurrency").predicted == pytest.approx(32.98)


def test_without_a_model_the_tied_concurrency_is_still_checked() -> None:
    r = run("vllm-qwen38-27b-fp8-2x5090-club3090-1086")
    assert r.engine_version == "0.27"  # its line numbers
    assert check(r, "gpu_kv_cache_tokens").reason_code == "reason.no_model"
    assert check(r, "max_concurrency").status == "equal"


def test_no_model_is_said_not_guessed() -> None:
    for fid in (
        "vllm-v1-gpu-blocks-format-pr13596",
        "vllm-v1-tokens-format-pr13596",
        "vllm-qwen38-27b-fp8-tp2-3090-mitchross1995",
    ):
        for c in run(fid).checks:
            assert c.status == "not_recomputable" and c.predicted is None and c.reason


def test_the_concurrency_bounds_from_tokens_from_0_20_1() -> None:
    # 622,408 = int(max_concurrency × 262,144): max_concurrency in [2.37430, 2.37431).
    c = check(run("vllm-qwen36-27b-int4-tp2-mtp3-fp8e5m2-3090-club3090-294"), "max_concurrency")
    assert c.predicted_range is not None
    lo, hi = c.predicted_range
    assert lo == pytest.approx(622408 / 262144) and hi == pytest.approx(622409 / 262144)
    assert "int(max_concurrency × 262,144)" in c.arithmetic
