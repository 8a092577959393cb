"""Cross-check: the planner's `engine: "transformers"` KV bytes against a real DynamicCache.

Source of truth: the tensors a real transformers 5.x model leaves in its cache (cache_measure.py,
tiny random models, CPU). Two layers of checks:
* library pins: the measured cache behaves as engine_rules.md §4 says (sliding layers keep
  min(n, W−1) tokens, MLA caches the latent, head_dim is taken from the config). If a transformers
  release changes this, these fail first and tell you the planner's rule is stale.
* planner cross-check: `plan(...).requests[0].kv_bytes` equals the measured total bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cache_measure import CONFIGS, SEQ_LENS, W, measure_cache_bytes

pytestmark = pytest.mark.crosscheck

DECODE_STEPS = (0, 3)  # one prefill of n tokens; or prefill n−3, then 3 single-token steps

_measured: dict[tuple[str, int, int], dict[str, Any]] = {}


def _measure(name: str, n: int, decode_steps: int = 0) -> dict[str, Any]:
    key = (name, n, decode_steps)
    if key not in _measured:
        _measured[key] = measure_cache_bytes(CONFIGS[name], n, decode_steps=decode_steps)
    return _measured[key]


# ---------------------------------------------------------------------------------------------
# Library pins (transformers cache_utils.py: DynamicLayer, DynamicSlidingWindowLayer;
# modeling_deepseek_v3.py). Expected values are hand-computed from the configs.


@pytest.mark.parametrize("decode_steps", DECODE_STEPS)
@pytest.mark.parametrize("n", SEQ_LENS)
def test_sliding_layers_keep_min_n_and_window_minus_one(n: int, decode_steps: int) -> None:
    # gemma2_alt: even layers sliding (W = 8), odd layers full.
    m = _measure("gemma2_alt", n, decode_steps)
    tokens = [row["tokens"] for row in m["layers"]]
    assert tokens == [min(n, W - 1), n, min(n, W - 1), n]


@pytest.mark.parametrize(
    ("name", "n", "expected_tokens", "expected_bytes"),
    [
        # 3 layers × 20 tok × 2 KV heads × (16+16) × 4 B
        ("llama_gqa", 20, [20, 20, 20], 3 * 20 * 2 * 32 * 4),
        # MQA: 1 KV head
        ("llama_mqa", 20, [20, 20], 2 * 20 * 1 * 32 * 4),
        # head_dim 24 from the config, not 64/4 = 16
        ("qwen3_head_dim", 9, [9, 9], 2 * 9 * 2 * (24 + 24) * 4),
        # every layer sliding: 7 tokens kept
        ("mistral_swa", 20, [7, 7], 2 * 7 * 2 * 32 * 4),
        # use_sliding_window false: the published window is ignored
        ("qwen2_no_swa", 20, [20, 20], 2 * 20 * 2 * 32 * 4),
        # layers ≥ max_window_layers (1) slide
        ("qwen2_swa_partial", 20, [20, 7], (20 + 7) * 2 * 32 * 4),
        # (7+20)·2 layers × 2 heads × (32+32) × 4 B
        ("gemma2_alt", 20, [7, 20, 7, 20], 27 * 2 * 2 * 64 * 4),
        # sliding_window_pattern 3: layers 2, 5 full
        ("gemma3_pattern", 20, [7, 7, 20, 7, 7, 20], (4 * 7 + 2 * 20) * 1 * 32 * 4),
        # explicit layer_types
        ("gemma3_layer_types", 20, [20, 7, 7, 20], (2 * 20 + 2 * 7) * 2 * 32 * 4),
        # alternating, layer 0 sliding; head_dim 16 ≠ 64/8
        ("gpt_oss", 20, [7, 20], (7 + 20) * 2 * 32 * 4),
        # MLA latent: (kv_lora_rank 32 + qk_rope 8) × 4 B per layer-token, no ×2, no heads
        ("deepseek_v3_mla", 20, [20, 20], 2 * 20 * (32 + 8) * 4),
        # Gemma-3n: the 2 KV-sharing layers hold nothing; 2 sliding (7) + 2 full (20) remain
        ("gemma3n_shared", 20, [7, 20, 7, 20, 0, 0], (2 * 7 + 2 * 20) * 2 * 32 * 4),
        ("gemma3n_shared", 8, [7, 8, 7, 8, 0, 0], (2 * 7 + 2 * 8) * 2 * 32 * 4),
        ("gemma3n_shared", 5, [5, 5, 5, 5, 0, 0], 4 * 5 * 2 * 32 * 4),
        # Gemma-4: sliding 2 KV heads × (16+16); full (global) 1 KV head × (32+32), K and V kept
        ("gemma4_global", 20, [7, 20, 7, 20], (2 * 7 * 2 * 32 + 2 * 20 * 1 * 64) * 4),
    ],
)
def test_measured_cache_matches_rules(
    name: str, n: int, expected_tokens: list[int], expected_bytes: int
) -> None:
    m = _measure(name, n)
    assert [row["tokens"] for row in m["layers"]] == expected_tokens
    assert m["total_bytes"] == expected_bytes
    assert m["dtypes"] == ["float32"]


def test_mla_caches_latent_and_rope_as_keys_and_values() -> None:
    m = _measure("deepseek_v3_mla", 9)
    for row in m["layers"]:
        assert row["k_shape"] == (1, 1, 9, 32)  # kv_lora_rank
        assert row["v_shape"] == (1, 1, 9, 8)  # qk_rope_head_dim


@pytest.mark.parametrize("decode_steps", DECODE_STEPS)
def test_kv_sharing_layers_are_cache_less(decode_steps: int) -> None:
    # transformers' Gemma3nTextConfig.kv_sharing_modes: the last num_kv_shared_layers layers
    # "reuse" an earlier layer's states and get a DummyLayer with no tensors in the cache.
    m = _measure("gemma3n_shared", 20, decode_steps)
    assert [row["type"] for row in m["layers"][4:]] == ["DummyLayer", "DummyLayer"]
    assert all(row["k_bytes"] == row["v_bytes"] == 0 for row in m["layers"][4:])


def test_sliding_storage_outlives_the_window_until_next_step() -> None:
    # The kept W−1 tokens are a view into the step's concatenation: after a prefill of 20 the
    # storage still holds all 20 tokens; in steady decode it holds W.
    after_prefill = _measure("mistral_swa", 20, 0)
    after_decode = _measure("mistral_swa", 20, 3)
    per_token = 2 * 2 * 16 * 4  # K+V × 2 heads × 16 × 4 B, one layer
    assert after_prefill["storage_bytes"] == 2 * 20 * per_token
    assert after_decode["storage_bytes"] == 2 * W * per_token
    assert after_prefill["total_bytes"] == after_decode["total_bytes"] == 2 * (W - 1) * per_token


def test_window_of_one_keeps_everything() -> None:
    # Edge case in DynamicSlidingWindowLayer.update: it slices `[-W + 1:]`, which for W = 1 is
    # `[0:]`, so nothing is ever dropped (a min(n, W − 1) rule would say 0 tokens).
    config = {**CONFIGS["mistral_swa"], "sliding_window": 1}
    m = measure_cache_bytes(config, 9, decode_steps=3)
    assert [row["tokens"] for row in m["layers"]] == [9, 9]


def test_config_dtype_sets_cache_dtype() -> None:
    config = {**CONFIGS["llama_mqa"], "torch_dtype": "bfloat16"}
    m = measure_cache_bytes(config, 9)
    assert m["dtypes"] == ["bfloat16"]
    assert m["total_bytes"] == 2 * 9 * 1 * 32 * 2


# ---------------------------------------------------------------------------------------------
# Planner cross-check


def _predict(config: dict[str, Any], n: int, kv_cache_dtype: str = "fp32") -> int:
    plan_mod = pytest.importorskip("planner.service")
    schema = pytest.importorskip("planner.core.schema")
    request = schema.PlanRequest.model_validate(
        {
            "model": config,
            "engine": "transformers",
            "kv_cache_dtype": kv_cache_dtype,
            "requests": [{"context_tokens": n}],
        }
    )
    kv_bytes: int = plan_mod.plan(request).requests[0].kv_bytes
    return kv_bytes


@pytest.mark.parametrize("decode_steps", DECODE_STEPS)
@pytest.mark.parametrize("n", SEQ_LENS)
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_planner_matches_real_dynamic_cache(name: str, n: int, decode_steps: int) -> None:
    predicted = _predict(CONFIGS[name], n)
    measured = _measure(name, n, decode_steps)
    tokens = [row["tokens"] for row in measured["layers"]]
    assert predicted == measured["total_bytes"], f"{name} n={n}: layers keep {tokens}"


@pytest.mark.parametrize("name", ["llama_gqa", "gemma2_alt", "deepseek_v3_mla"])
def test_planner_auto_dtype_follows_config(name: str) -> None:
    config = {**CONFIGS[name], "torch_dtype": "bfloat16"}
    predicted = _predict(config, 20, kv_cache_dtype="auto")
    measured = measure_cache_bytes(config, 20)
    assert measured["dtypes"] == ["bfloat16"]
    assert predicted == measured["total_bytes"]
