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
- gpt-oss checkpoint sizes: 60.8 GiB (120b) and 12.8 GiB (20b) in MXFP4, the gpt-oss model card;
- Llama-3.1-70B w8a8 (int8 per-channel weights, compressed-tensors): vLLM logged "Loading model
  weights took 67.7229 GB" (GiB) for neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8,
  https://github.com/vllm-project/vllm/pull/12569 (tests/fixtures/engine_logs.jsonl).
"""

from __future__ import annotations

import pytest

from planner.catalog import get_model, list_models
from planner.core.errors import ModelConfigError
from planner.core.params import parameter_counts, weight_bytes

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


def test_gpt_oss_mxfp4_checkpoint_sizes() -> None:
    big = weight_bytes(get_model("openai/gpt-oss-120b").config)
    small = weight_bytes(get_model("openai/gpt-oss-20b").config)
    assert abs(big.total / GiB - 60.8) <= 0.01 * 60.8
    assert abs(small.total / GiB - 12.8) <= 0.01 * 12.8


def test_compressed_tensors_int8_channel_matches_vllm_loaded_bytes() -> None:
    cfg = dict(get_model("meta-llama/Llama-3.1-70B").config)
    cfg["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "format": "int-quantized",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True},
            }
        },
        "ignore": ["lm_head"],
    }
    loaded = 67.7229 * GiB
    assert abs(weight_bytes(cfg).total - loaded) <= 0.005 * loaded


# A tiny config whose stored bytes are derived by hand below for each scheme.
TINY = {
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}
# Linears (in, out): q 256→256, k 256→128, v 256→128, o 256→256, gate/up 256→512, down 512→256.
LINEARS = [(256, 256), (256, 128), (256, 128), (256, 256), (256, 512), (256, 512), (512, 256)]
LINEAR_PARAMS = sum(i * o for i, o in LINEARS)  # 557,056
REST_BF16 = 2 * (1000 * 256) * 2 + (2 * 256 + 256) * 2  # embed + lm_head, 3 norms: 1,025,536


def test_unquantized_bytes_are_two_per_parameter() -> None:
    assert weight_bytes(TINY).total == 2 * LINEAR_PARAMS + REST_BF16


def test_fp8_block_scales() -> None:
    q = {"quant_method": "fp8", "weight_block_size": [128, 128], "fmt": "e4m3"}
    scales = sum(-(-o // 128) * -(-i // 128) for i, o in LINEARS) * 4  # fp32 per 128×128 block
    assert weight_bytes({**TINY, "quantization_config": q}).total == (
        LINEAR_PARAMS + scales + REST_BF16
    )


def test_awq_int4_group_scales_and_zeros() -> None:
    q = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}
    # qweight 4 bits, per (128 inputs × 1 output) group an fp16 scale and a 4-bit zero.
    per = sum(i * o // 2 + (i // 128) * o * (2 + 0.5) for i, o in LINEARS)
    assert weight_bytes({**TINY, "quantization_config": q}).total == round(per) + REST_BF16


def test_gptq_adds_g_idx() -> None:
    q = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}
    per = sum(i * o // 2 + (i // 128) * o * 2.5 + 4 * i for i, o in LINEARS)
    assert weight_bytes({**TINY, "quantization_config": q}).total == round(per) + REST_BF16


def test_nvfp4_and_excluded_modules() -> None:
    q = {
        "quant_method": "modelopt",
        "quant_algo": "NVFP4",
        "group_size": 16,
        "exclude_modules": ["lm_head", "model.layers.*.self_attn*"],
    }
    mlp = LINEARS[4:]
    attn = LINEARS[:4]
    # fp4 weights, an fp8 scale per 16 inputs, two fp32 per-tensor scales; attention stays bf16.
    quantized = sum(i * o / 2 + i * o / 16 + 8 for i, o in mlp)
    expected = round(quantized) + 2 * sum(i * o for i, o in attn) + REST_BF16
    assert weight_bytes({**TINY, "quantization_config": q}).total == expected


def test_unknown_quantization_is_refused_not_guessed() -> None:
    with pytest.raises(ModelConfigError) as exc:
        weight_bytes({**TINY, "quantization_config": {"quant_method": "hqq"}})
    assert exc.value.problems[0].loc[:2] == ("model", "quantization_config")
