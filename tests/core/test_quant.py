"""Weight bytes as stored (planner.core.quant), against published sizes and hand derivations.

Sources: gpt-oss checkpoint sizes 60.8 GiB (120b) and 12.8 GiB (20b) in MXFP4, the gpt-oss
model card (https://huggingface.co/openai/gpt-oss-120b); Llama-3.1-70B w8a8 (int8 per-channel
weights, compressed-tensors): vLLM logged "Loading model weights took 67.7229 GB" (GiB) for
neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8,
https://github.com/vllm-project/vllm/pull/12569 (tests/fixtures/engine_logs.jsonl). The tiny
config's bytes are derived by hand below for each scheme.
"""

from __future__ import annotations

import pytest

from planner.catalog import get_model
from planner.core.errors import ModelConfigError
from planner.core.quant import weight_bytes

GiB = 1 << 30


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
