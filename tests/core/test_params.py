"""Parameter counts and stored bytes from configs, against published figures.

Sources of the published numbers:
- totals of dense and MoE catalog models: the Hugging Face safetensors parameter count shown on
  each model page (https://huggingface.co/<id>), bundled as `num_parameters` in the catalog;
- Llama-4: Meta's model cards, "17B activated, 109B total" (Scout) and "17B activated, 400B
  total" (Maverick), https://huggingface.co/meta-llama/Llama-4-Scout-17B-16E-Instruct and
  https://huggingface.co/meta-llama/Llama-4-Maverick-17B-128E-Instruct;
- DeepSeek-V3: "671B total parameters with 37B activated for each token" (the 685B on the Hub
  adds the 14B multi-token-prediction module), https://huggingface.co/deepseek-ai/DeepSeek-V3;
- Qwen3-30B-A3B: "30.5B in total and 3.3B activated", https://huggingface.co/Qwen/Qwen3-30B-A3B;
- gpt-oss-120b: 116.8B total, 5.1B active (the active figure leaves out the embedding table,
  which a token only indexes), https://huggingface.co/openai/gpt-oss-120b and the gpt-oss model
  card (arXiv:2508.10925, table 1);
- Mixtral-8x7B: 46.7B total, 12.9B used per token, https://mistral.ai/news/mixtral-of-experts;
- DeepSeek-V2-Lite: 15.7B total, 2.4B activated, https://huggingface.co/deepseek-ai/DeepSeek-V2-Lite;
"""

from __future__ import annotations

import pytest

from planner.catalog import get_model, list_models
from planner.core.params import parameter_counts

GiB = 1 << 30
PUBLISHED = [m for m in list_models() if (m.num_parameters_source or "").startswith("published")]


@pytest.mark.parametrize("entry", PUBLISHED, ids=[m.id for m in PUBLISHED])
def test_totals_match_the_published_safetensors_counts(entry: object) -> None:
    from planner.catalog import CatalogModel

    assert isinstance(entry, CatalogModel)
    counted = parameter_counts(entry.config).total
    if entry.id == "google/gemma-3-27b-it":
        # Its SigLIP vision tower is counted as a generic ViT (an estimate): within 0.1 %.
        assert abs(counted - entry.num_parameters) <= 0.001 * entry.num_parameters
    else:
        assert counted == entry.num_parameters


@pytest.mark.parametrize(
    ("model_id", "total", "active", "tol_total", "tol_active", "active_kind"),
    [
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", 109e9, 17e9, 0.01, 0.02, "active"),
        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", 400e9, 17e9, 0.01, 0.02, "active"),
        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", 400.7e9, 17e9, 0.01, 0.02, "active"),
        ("deepseek-ai/DeepSeek-V3", 671e9, 37e9, 0.005, 0.02, "active"),
        ("Qwen/Qwen3-30B-A3B", 30.5e9, 3.3e9, 0.005, 0.02, "active"),
        ("openai/gpt-oss-120b", 116.8e9, 5.1e9, 0.005, 0.01, "no_lookup"),
        ("mistralai/Mixtral-8x7B-v0.1", 46.7e9, 12.9e9, 0.005, 0.005, "active"),
        ("deepseek-ai/DeepSeek-V2-Lite", 15.7e9, 2.4e9, 0.005, 0.025, "no_lookup"),
    ],
)
def test_moe_totals_and_active_parameters(
    model_id: str,
    total: float,
    active: float,
    tol_total: float,
    tol_active: float,
    active_kind: str,
) -> None:
    p = parameter_counts(get_model(model_id).config)
    assert p.is_moe
    assert abs(p.total - total) <= tol_total * total
    got = p.active_per_token if active_kind == "active" else p.active_without_embedding_lookup
    assert abs(got - active) <= tol_active * active


def test_llama4_layers_interleave_and_carry_a_shared_expert() -> None:
    scout = parameter_counts(get_model("meta-llama/Llama-4-Scout-17B-16E-Instruct").config)
    maverick = parameter_counts(get_model("meta-llama/Llama-4-Maverick-17B-128E-Instruct").config)
    assert (scout.moe_layers, scout.num_experts, scout.num_shared_experts) == (48, 16, 1)
    # interleave_moe_layer_step 2: layers 1, 3, …, 47 are MoE, the others dense.
    assert (maverick.moe_layers, maverick.num_experts) == (24, 128)
    # One expert: gate, up (5120 → 8192) and down (8192 → 5120).
    assert scout.expert == 3 * 5120 * 8192


def test_deepseek_first_dense_layers_and_mtp_left_out() -> None:
    p = parameter_counts(get_model("deepseek-ai/DeepSeek-V3").config)
    assert p.moe_layers == 61 - 3  # first_k_dense_replace 3
    assert (p.num_experts, p.top_k, p.num_shared_experts) == (256, 8, 1)
    assert p.expert == 3 * 7168 * 2048
    # The MTP module is ~14B (the Hub's 685B minus 671B) and is not in the total.
    assert 11e9 < p.mtp < 15e9


def test_qwen_moe_sparse_step_and_dense_only_layers() -> None:
    base = dict(get_model("Qwen/Qwen3-30B-A3B").config)
    every = parameter_counts(base)
    half = parameter_counts({**base, "decoder_sparse_step": 2})
    pinned = parameter_counts({**base, "mlp_only_layers": [0, 1]})
    assert (every.moe_layers, half.moe_layers, pinned.moe_layers) == (48, 24, 46)
    # A dense layer swaps 128 experts + router for one MLP of intermediate_size 6144.
    h = 2048
    per_moe_layer = 128 * 3 * h * 768 + h * 128
    assert every.total - pinned.total == 2 * (per_moe_layer - 3 * h * 6144)
