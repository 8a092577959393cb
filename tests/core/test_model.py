"""Config parsing: every attention kind the issue names, from config.json objects."""

from __future__ import annotations

from typing import Any

import pytest

from planner.core.errors import ModelConfigError
from planner.core.model import shape_from_config

BASE: dict[str, Any] = {"num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512}


def kinds(cfg: dict[str, Any]) -> list[tuple[str, int | None]]:
    return [(s.kind, s.window_tokens) for s in shape_from_config(cfg).layers]


def test_head_dim_fallback_and_kv_fallback() -> None:
    s = shape_from_config(BASE)
    assert s.head_dim == 64 and s.num_key_value_heads == 8  # MHA: Hkv falls back to Hq


def test_mqa_and_gqa() -> None:
    assert shape_from_config({**BASE, "num_key_value_heads": 1}).query_group_size == 8
    assert shape_from_config({**BASE, "num_key_value_heads": 2}).query_group_size == 4


def test_k_and_v_head_sizes_that_differ() -> None:
    s = shape_from_config({**BASE, "head_dim": 192, "v_head_dim": 128, "num_key_value_heads": 2})
    assert (s.layers[0].head_size, s.layers[0].head_size_v) == (192, 128)
    assert s.layers[0].elements_per_token == 2 * (192 + 128)


def test_mla_latent_no_times_two() -> None:
    s = shape_from_config(
        {
            **BASE,
            "model_type": "deepseek_v3",
            "kv_lora_rank": 512,
            "qk_rope_head_dim": 64,
            "num_key_value_heads": 8,
        }
    )
    assert s.is_mla and s.layers[0].elements_per_token == 576 and s.layers[0].kv_heads == 1


def test_sliding_everywhere_from_model_level_field() -> None:
    assert kinds({**BASE, "sliding_window": 16}) == [("sliding", 16)] * 4


def test_use_sliding_window_false_disables_it() -> None:
    assert (
        kinds(
            # Qwen2Config's own default is 32 KV heads, more than BASE's 8 query heads.
            {
                **BASE,
                "model_type": "qwen2",
                "num_key_value_heads": 8,
                "sliding_window": 16,
                "use_sliding_window": False,
            }
        )
        == [("full", None)] * 4
    )


def test_layer_types_win() -> None:
    cfg = {
        **BASE,
        "sliding_window": 8,
        "layer_types": [
            "sliding_attention",
            "full_attention",
            "full_attention",
            "sliding_attention",
        ],
    }
    assert kinds(cfg) == [("sliding", 8), ("full", None), ("full", None), ("sliding", 8)]


def test_gemma2_and_gpt_oss_alternate_from_even_indices() -> None:
    for mt in ("gemma2", "gpt_oss"):
        assert kinds({**BASE, "model_type": mt, "sliding_window": 8}) == [
            ("sliding", 8),
            ("full", None),
            ("sliding", 8),
            ("full", None),
        ]


def test_sliding_window_pattern() -> None:
    cfg = {**BASE, "num_hidden_layers": 12, "sliding_window": 8, "sliding_window_pattern": 6}
    got = kinds(cfg)
    assert [i for i, k in enumerate(got) if k[0] == "full"] == [5, 11]


def test_gemma3_text_config_default_pattern() -> None:
    cfg = {
        "model_type": "gemma3",
        "torch_dtype": "bfloat16",
        "text_config": {
            **BASE,
            "model_type": "gemma3_text",
            "num_hidden_layers": 6,
            "sliding_window": 8,
            "head_dim": 32,
        },
    }
    s = shape_from_config(cfg)
    assert [x.kind for x in s.layers] == ["sliding"] * 5 + ["full"]
    assert s.dtype == "bf16" and s.head_dim == 32


def test_llama4_chunked_local_attention() -> None:
    cfg = {
        **BASE,
        "model_type": "llama4_text",
        "num_hidden_layers": 8,
        "attention_chunk_size": 8192,
    }
    got = kinds(cfg)
    assert got[3] == ("full", None) and got[7] == ("full", None)
    assert got[0] == ("chunked", 8192)


@pytest.mark.parametrize(
    ("cfg", "field"),
    [
        ({"num_attention_heads": 8, "hidden_size": 64}, "num_hidden_layers"),
        ({**BASE, "num_key_value_heads": 3}, "num_key_value_heads"),
        ({**BASE, "hidden_size": 500}, "hidden_size"),
        ({**BASE, "num_hidden_layers": True}, "num_hidden_layers"),
        ({**BASE, "num_hidden_layers": 0}, "num_hidden_layers"),
        ({**BASE, "head_dim": "64"}, "head_dim"),
        ({**BASE, "layer_types": ["sliding_attention"] * 4}, "sliding_window"),
        ({**BASE, "layer_types": ["mamba"] * 4}, "layer_types"),
        ({**BASE, "torch_dtype": "int3"}, "torch_dtype"),
    ],
)
def test_bad_configs_name_the_field(cfg: dict[str, Any], field: str) -> None:
    with pytest.raises(ModelConfigError) as info:
        shape_from_config(cfg)
    assert field in info.value.problems[0].field


def test_parameter_count_counts_every_expert() -> None:
    # Published counts (catalog): Mixtral-8x7B 46,702,792,704; Llama-3.1-8B 8,030,261,248.
    from planner.catalog import get_model
    from planner.core.params import parameter_counts

    for mid in ("mistralai/Mixtral-8x7B-v0.1", "meta-llama/Llama-3.1-8B", "Qwen/Qwen3-8B"):
        entry = get_model(mid)
        est = parameter_counts(entry.config).total
        assert abs(est - entry.num_parameters) / entry.num_parameters < 1e-4
    # Qwen3-30B-A3B (a pasted MoE config): ~30.5 B parameters, not the 3.3 B of a dense read.
    qwen_moe = {
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "num_experts": 128,
        "moe_intermediate_size": 768,
        "intermediate_size": 6144,
        "vocab_size": 151936,
    }
    est = parameter_counts({**qwen_moe, "num_experts_per_tok": 8}).total
    assert 30.4e9 < est < 30.6e9
