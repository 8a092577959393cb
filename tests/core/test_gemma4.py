"""Gemma-4's global attention layers, as transformers 5.24's Gemma4TextConfig resolves them
(`per_layer_config` for full_attention layers: head_dim = global_head_dim, popped with default
512; num_key_value_heads = num_global_key_value_heads only when attention_k_eq_v) and vLLM 0.33
caches them (gemma4.py builds each layer from that per-layer config; K and V both cached).
Expected values are hand arithmetic from those rules; tests/crosscheck holds them against a
real transformers cache."""

from __future__ import annotations

from typing import Any

import pytest

from planner.core.errors import ModelConfigError
from planner.core.model import shape_from_config
from planner.core.params import parameter_counts

BASE: dict[str, Any] = {
    "model_type": "gemma4_text",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "sliding_window": 8,
    "vocab_size": 128,
    "layer_types": ["sliding_attention", "full_attention"] * 2,
    "hidden_size_per_layer_input": 0,
}


def _layers(**extra: Any) -> list[tuple[str, int, int]]:
    shape = shape_from_config({**BASE, **extra})
    return [(s.kind, s.kv_heads, s.head_size) for s in shape.layers]


def test_keys_as_values_layers_take_the_global_heads() -> None:
    got = _layers(global_head_dim=32, num_global_key_value_heads=1, attention_k_eq_v=True)
    assert got == [("sliding", 2, 16), ("full", 1, 32)] * 2


def test_without_keys_as_values_only_the_width_changes() -> None:
    got = _layers(global_head_dim=32, num_global_key_value_heads=1)
    assert got == [("sliding", 2, 16), ("full", 2, 32)] * 2


def test_global_head_dim_defaults_to_512() -> None:
    assert _layers()[1] == ("full", 2, 512)


def test_keys_as_values_layers_have_no_v_proj() -> None:
    k_eq_v = {"global_head_dim": 32, "num_global_key_value_heads": 1, "attention_k_eq_v": True}
    with_v = parameter_counts({**BASE, **k_eq_v, "attention_k_eq_v": False}).total
    without_v = parameter_counts({**BASE, **k_eq_v}).total
    # 2 global layers: no v_proj (64 -> 2 × 32); k_proj 64 -> 1 × 32, not 2 × 32
    assert with_v - without_v == 2 * (64 * 2 * 32 + 64 * 32)


def test_per_layer_input_embeddings_are_refused_for_weights() -> None:
    with pytest.raises(ModelConfigError, match="hidden_size_per_layer_input"):
        parameter_counts({**BASE, "hidden_size_per_layer_input": 8})
