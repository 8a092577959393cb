"""Hybrid weights by layer kind: state mixers (Mamba2, Mamba, gated DeltaNet, Kimi delta
attention, short convolutions) and blocks without an MLP are counted as transformers' modules
hold them, not as attention + MLP on every layer."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from planner.core.params import parameter_counts

ROOT = Path(__file__).resolve().parents[2]


def _config(model_id: str) -> dict[str, Any]:
    models = json.loads((ROOT / "tests/fixtures/hybrid_models.json").read_text("utf-8"))["models"]
    return dict(next(m["config"] for m in models if m["id"] == model_id))


# Sum of parameter numels (plus persistent buffers: checkpoint tensors such as Kimi-Linear's
# router correction bias) of transformers 5.24.0's model built from each published config (as
# trimmed in the fixture) on the meta device; test_matches_transformers_modules recomputes it.
# Model cards: Nemotron-Nano-9B-v2 "9B"; Jamba-Mini-1.6 52B total, 12B active.
EXPECTED = {
    "nvidia/NVIDIA-Nemotron-Nano-9B-v2": (8_888_227_328, 8_888_227_328),
    "ai21labs/AI21-Jamba-Mini-1.6": (51_570_323_328, 12_110_311_296),
    "ibm-granite/granite-4.0-h-tiny": (6_939_037_248, 1_465_470_528),
    "ibm-granite/granite-4.0-h-small": (35_478_895_104, 12_074_678_784),
    "tiiuae/Falcon-H1-7B-Instruct": (7_585_513_568, 7_585_513_568),
    "LiquidAI/LFM2-2.6B": (1_908_669_440, 1_908_669_440),
}
# The same count for the GDN / KDA hybrids (transformers 5.24.0's Qwen3NextForCausalLM,
# KimiLinearForCausalLM, and Qwen3_5(Moe)ForConditionalGeneration: the vision tower included).
# Names: Qwen3-Next-80B, Kimi-Linear-48B, Qwen3.6-27B, Qwen3.6-35B.
EXPECTED_TOTAL = {
    "Qwen/Qwen3-Next-80B-A3B-Instruct": 79_674_391_296,
    "moonshotai/Kimi-Linear-48B-A3B-Instruct": 49_122_681_728,
    "Qwen/Qwen3.6-27B": 27_356_728_560,
    "Qwen/Qwen3.6-35B-A3B": 35_107_181_936,
}


@pytest.mark.parametrize("model_id", sorted(EXPECTED))
def test_hybrid_totals(model_id: str) -> None:
    counts = parameter_counts(_config(model_id))
    assert (counts.total, counts.active_per_token) == EXPECTED[model_id]


@pytest.mark.parametrize("model_id", sorted(EXPECTED_TOTAL))
def test_state_hybrid_totals(model_id: str) -> None:
    assert parameter_counts(_config(model_id)).total == EXPECTED_TOTAL[model_id]


def test_kimi_linear_walks_its_delta_attention_layers() -> None:
    # KimiLinearDeltaAttention on the 20 `kda_layers`, MLA on the 7 others: one KDA layer
    # holds q/k/v (3 x 2304 x 4096), the forget and output gates (2 x (2304 x 128 + 128 x 4096)),
    # b_proj (2304 x 32), o_proj (4096 x 2304), a conv of 3 x 4096 x 4, dt_bias, A_log, o_norm.
    counts = parameter_counts(_config("moonshotai/Kimi-Linear-48B-A3B-Instruct"))
    kda_layer = 3 * 2304 * 4096 + 2 * (2304 * 128 + 128 * 4096) + 2304 * 32 + 4096 * 2304
    kda_layer += 3 * 4096 * 4 + 4096 + 32 + 128
    assert kda_layer == 39_514_272
    assert counts.moe_layers == 26 and counts.num_experts == 256 and counts.top_k == 8


def test_jamba_has_experts_on_odd_layers_only() -> None:
    # JambaConfig.layers_num_experts: experts where i % expert_layer_period == offset (2, 1).
    counts = parameter_counts(_config("ai21labs/AI21-Jamba-Mini-1.6"))
    assert counts.moe_layers == 16 and counts.num_experts == 16 and counts.top_k == 2


@pytest.mark.crosscheck
@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None,
    reason="needs the crosscheck extra (torch, transformers)",
)
@pytest.mark.parametrize("model_id", sorted({**EXPECTED, **EXPECTED_TOTAL}))
def test_matches_transformers_modules(model_id: str) -> None:
    cfg = _config(model_id)
    theirs = _transformers_count(cfg)
    assert theirs == {**{k: v[0] for k, v in EXPECTED.items()}, **EXPECTED_TOTAL}[model_id]
    assert parameter_counts(cfg).total == theirs


def _transformers_count(cfg: dict[str, Any]) -> int:
    """Parameters plus persistent buffers of transformers' model on the meta device (the whole
    multimodal model where the config wraps a text_config)."""
    import copy

    import torch
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM, AutoModelForImageTextToText

    conf = CONFIG_MAPPING[cfg["model_type"]].from_dict(copy.deepcopy(cfg))
    auto = AutoModelForImageTextToText if "text_config" in cfg else AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(conf)
    persistent = set(model.state_dict())
    buffers = sum(b.numel() for name, b in model.named_buffers() if name in persistent)
    return int(sum(p.numel() for p in model.parameters()) + buffers)


def _hybrid_ids() -> list[str]:
    models = json.loads((ROOT / "tests/fixtures/hybrid_models.json").read_text("utf-8"))["models"]
    return [m["id"] for m in models]


@pytest.mark.crosscheck
@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None,
    reason="needs the crosscheck extra (torch, transformers)",
)
@pytest.mark.parametrize("model_id", _hybrid_ids())
def test_every_hybrid_equals_transformers(model_id: str) -> None:
    # Every hybrid in the fixture, vision towers included (Qwen3.5/3.6), counted exactly.
    cfg = _config(model_id)
    assert parameter_counts(cfg).total == _transformers_count(cfg)
