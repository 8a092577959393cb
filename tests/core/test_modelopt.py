"""A ModelOpt hf_quant_config.json beside config.json (planner.core.modelopt), as vLLM reads it.

Sources: vLLM 0.19 `transformers_utils/config.py` get_config reads hf_quant_config.json only when
config.json has no quantization_config; `ModelOptQuantConfigBase.from_config` takes quant_algo,
kv_cache_quant_algo, group_size and exclude_modules from its "quantization" object;
`model_arch_config_convertor._normalize_quantization_config` needs producer.name "modelopt";
`utils/torch_utils.resolve_kv_cache_dtype_string` maps kv_cache_quant_algo FP8 to "fp8_e4m3"
for --kv-cache-dtype auto (0.33: planner.core.engines.vllm.kv_checkpoint; by release:
tests/core/test_kv_checkpoint.py). The files are nvidia's, as aiconfigurator saves them
(ai-dynamo/aiconfigurator @ 095f58a5, aic-core/src/aiconfigurator_core/model_configs/).
The byte counts are the formats' arithmetic (FP8: 1 byte per weight, fp32 weight_scale and
input_scale per tensor; NVFP4: 4 bits per weight, an fp8 scale per 16 inputs, fp32
weight_scale_2 and input_scale), derived by hand below.
"""

from __future__ import annotations

import pytest

from planner.catalog import get_model
from planner.core.engines.vllm.kv_checkpoint import checkpoint_kv_dtype
from planner.core.errors import ModelConfigError
from planner.core.model import shape_from_config
from planner.core.modelopt import with_hf_quant_config
from planner.core.quant import weight_bytes

V033 = (0, 33, 0)


def kv_cache_quant_algo(config: dict[str, object]) -> str | None:
    """The KV cache dtype vLLM 0.33 runs for kv_cache_dtype auto (engines/vllm/kv_checkpoint)."""
    return checkpoint_kv_dtype(V033, shape_from_config(config), False)


TINY = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}
# (in, out) of q, k, v, o, gate, up, down per layer.
LINEARS = [(64, 64), (64, 32), (64, 32), (64, 64), (64, 128), (64, 128), (128, 64)]
# Embedding and lm_head (bf16, lm_head excluded), 2 norms per layer and the final norm.
REST_BF16 = 2 * (2 * 1000 * 64 + 2 * 2 * 64 + 64)


def _file(algo: str, **extra: object) -> dict[str, object]:
    quant = {"quant_algo": algo, "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}
    return {"producer": {"name": "modelopt", "version": "0.23.0"}, "quantization": quant | extra}


def test_fp8_file_sizes_weights_at_one_byte_plus_tensor_scales() -> None:
    cfg = with_hf_quant_config(TINY, _file("FP8"))
    per_layer = sum(i * o + 8 for i, o in LINEARS)
    assert weight_bytes(cfg).total == 2 * per_layer + REST_BF16
    assert kv_cache_quant_algo(cfg) == "fp8_e4m3"


def test_nvfp4_file_sizes_groups_of_16() -> None:
    cfg = with_hf_quant_config(TINY, _file("nvfp4", group_size=16))  # upper-cased as vLLM does
    per_layer = sum(i * o / 2 + i * o / 16 + 8 for i, o in LINEARS)
    assert weight_bytes(cfg).total == round(2 * per_layer) + REST_BF16


def test_config_quantization_wins_over_the_file() -> None:
    own = {"quant_method": "fp8"}
    cfg = with_hf_quant_config({**TINY, "quantization_config": own}, _file("NVFP4"))
    assert cfg["quantization_config"] is own


@pytest.mark.parametrize(
    ("hf_quant", "loc", "code"),
    [
        (_file("MIXED_PRECISION"), "quant_algo", "model.modelopt_algo_unsized"),
        (_file("W4A8_AWQ"), "quant_algo", "model.modelopt_algo_unsized"),
        ({"quantization": {"quant_algo": "FP8"}}, "name", "model.hf_quant_config_producer"),
        (_file("NVFP4", group_size=0), "group_size", "model.hf_quant_config_group"),
        (
            _file("FP8", exclude_modules="lm_head"),
            "exclude_modules",
            "model.hf_quant_config_exclude",
        ),
        ([], "hf_quant_config", "model.not_object"),
    ],
)
def test_what_is_not_sized_is_refused_by_name(hf_quant: object, loc: str, code: str) -> None:
    with pytest.raises(ModelConfigError) as exc:
        with_hf_quant_config(TINY, hf_quant)
    problem = exc.value.problems[0]
    assert problem.loc[-1] == loc and problem.code == code


def test_catalog_llama_70b_fp8_counts_the_format() -> None:
    # nvidia/Llama-3.1-70B-Instruct-FP8: FP8 linears (7 per layer, 80 layers) with two fp32
    # scales each, the bf16 embedding, lm_head (excluded) and norms.
    entry = get_model("nvidia/Llama-3.1-70B-Instruct-FP8")
    h, f, kv, layers, vocab = 8192, 28672, 1024, 80, 128256
    linear = 2 * h * h + 2 * h * kv + 3 * h * f
    expected = layers * (linear + 7 * 8) + 2 * (2 * vocab * h + (2 * layers + 1) * h)
    assert entry.config["quantization_config"]["quant_algo"] == "FP8"
    assert entry.resolved_weights_bytes == expected == 72_656_376_192
    assert kv_cache_quant_algo(entry.config) == "fp8_e4m3"


@pytest.mark.parametrize(
    ("model_id", "total"),
    [
        ("nvidia/Qwen3-235B-A22B-NVFP4", 134_101_651_392),
        ("nvidia/DeepSeek-V3.1-NVFP4", 386_380_112_800),
        ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", 18_788_305_952),
    ],
)
def test_catalog_nvfp4_entries_read_their_file(model_id: str, total: int) -> None:
    entry = get_model(model_id)
    assert entry.config["quantization_config"]["quant_algo"] == "NVFP4"
    assert entry.resolved_weights_bytes == total


@pytest.mark.parametrize(
    ("quant", "expected"),
    [
        ({"kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"}}, "fp8_e4m3"),
        ({"kv_cache_scheme": {"num_bits": 4, "type": "float"}}, "nvfp4"),
        ({"kv_cache_scheme": {"dynamic": True, "num_bits": 8, "type": "float"}}, None),
        ({"kv_cache_quant_algo": "int8"}, None),  # vLLM falls back to auto
        ({}, None),
    ],
)
def test_kv_cache_dtype_as_vllm_takes_it(quant: dict[str, object], expected: str | None) -> None:
    q = {"quant_method": "modelopt", "quant_algo": "NVFP4", **quant}
    assert kv_cache_quant_algo({**TINY, "quantization_config": q}) == expected
    assert (
        kv_cache_quant_algo({**TINY, "quantization_config": {**q, "quant_method": "fp8"}}) is None
    )
