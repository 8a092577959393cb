"""Hybrid weights by layer kind: state mixers (Mamba2, Mamba) and blocks without an MLP are
counted as transformers' modules hold them, not as attention + MLP on every layer."""

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


# Sum of parameter numels of transformers 5.24.0's model built from each published config (as
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


@pytest.mark.parametrize("model_id", sorted(EXPECTED))
def test_hybrid_totals(model_id: str) -> None:
    counts = parameter_counts(_config(model_id))
    assert (counts.total, counts.active_per_token) == EXPECTED[model_id]


def test_jamba_has_experts_on_odd_layers_only() -> None:
    # JambaConfig.layers_num_experts: experts where i % expert_layer_period == offset (2, 1).
    counts = parameter_counts(_config("ai21labs/AI21-Jamba-Mini-1.6"))
    assert counts.moe_layers == 16 and counts.num_experts == 16 and counts.top_k == 2


@pytest.mark.crosscheck
@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None,
    reason="needs the crosscheck extra (torch, transformers)",
)
@pytest.mark.parametrize("model_id", sorted(EXPECTED))
def test_matches_transformers_modules(model_id: str) -> None:
    import torch
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    cfg = _config(model_id)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(CONFIG_MAPPING[cfg["model_type"]].from_dict(cfg))
    assert sum(p.numel() for p in model.parameters()) == parameter_counts(cfg).total


def _hybrid_ids() -> list[str]:
    models = json.loads((ROOT / "tests/fixtures/hybrid_models.json").read_text("utf-8"))["models"]
    return [m["id"] for m in models]


@pytest.mark.crosscheck
@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None,
    reason="needs the crosscheck extra (torch, transformers)",
)
@pytest.mark.parametrize("model_id", _hybrid_ids())
def test_every_hybrid_within_one_percent_of_transformers(model_id: str) -> None:
    import torch
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    cfg = _config(model_id)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(CONFIG_MAPPING[cfg["model_type"]].from_dict(cfg))
    theirs = sum(p.numel() for p in model.parameters())
    counts = parameter_counts(cfg)
    # AutoModelForCausalLM builds the text model only (Qwen3.5/3.6 wrap a vision tower).
    ours = counts.total - counts.vision
    assert abs(ours - theirs) <= 0.01 * theirs
