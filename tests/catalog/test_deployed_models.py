"""Catalog entries for models people deploy, each pinned to a figure published outside kvplan.

KV bytes per token are in test_catalog.KV_TABLE (arithmetic from the sourced configs); here the
parameter counts and weights are held to what others published or measured:

* Gemma-3 4B / 12B: keras-hub's preset parameter counts (keras_hub/src/models/gemma3/
  gemma3_presets.py @ 71453d08), made with a 262,144-token vocabulary; Hugging Face's
  text_config has 262,208 (64 image-token rows more).
* Mistral-Small-3.2 (served with the 3.1 config): llm-d-planner's vLLM measurement
  (docs/empirical-vllm-memory-results.md @ e50305af): 44.76 GiB of weights, 163,840 B of KV per
  token (28.20 GiB for 184,832 tokens).
* GLM-4.5-Air: 106 billion parameters (transformers' docs/source/en/model_doc/glm4_moe.md, the
  GLM-4.5 model card).
* Qwen3.5 / 3.6: the sizes their names and model cards give (27 B, 35 B, 122 B, 397 B).
* Gemma-4 31B / 26B-A4B: their model cards' 30.7 B and 25.2 B (3.8 B active) text parameters.
* Mixtral-8x22B-Instruct: the instruct vocabulary (32,768) adds 768 rows to the embedding and
  the LM head of the base model.
* phi-4: vLLM 0.19.0's load of it (budget_logs.jsonl, llm-d-planner#205): 27.39 GiB of weights,
  204,800 B of KV per token (46.08 GiB for 241,568 tokens).
* NVIDIA's NVFP4 and Moonshot's int4 re-quantizations hold their base model's parameters.
"""

from __future__ import annotations

import pytest

from planner.catalog import get_model
from planner.core.model import shape_from_config, text_config
from planner.core.params import parameter_counts
from planner.core.units import GiB

HF_EXTRA_VOCAB = 262208 - 262144


@pytest.mark.parametrize(
    ("model_id", "hidden", "keras_text", "keras_total"),
    [
        ("google/gemma-3-4b-it", 2560, 3_880_099_328, 4_299_915_632),
        ("google/gemma-3-12b-it", 3840, 11_765_788_416, 12_187_079_280),
    ],
)
def test_gemma3_counts_are_keras_hubs(
    model_id: str, hidden: int, keras_text: int, keras_total: int
) -> None:
    entry = get_model(model_id)
    text_only = {k: v for k, v in entry.config.items() if k != "vision_config"}
    text_only.update(text_config(entry.config))  # the decoder alone, as keras' "_text" preset
    assert parameter_counts(text_only).total == keras_text + HF_EXTRA_VOCAB * hidden
    # The SigLIP tower and projector as transformers' Gemma3ForConditionalGeneration holds them.
    assert entry.num_parameters == keras_total + HF_EXTRA_VOCAB * hidden
    assert parameter_counts(entry.config).total == entry.num_parameters


def test_gemma3_27b_counts_the_published_total() -> None:
    # Hugging Face's safetensors parameter count of google/gemma-3-27b-it: 27,432,406,640.
    entry = get_model("google/gemma-3-27b-it")
    assert parameter_counts(entry.config).total == entry.num_parameters == 27_432_406_640


def test_gemma3_4b_heads_come_from_the_class_defaults() -> None:
    # The published text_config leaves them out; litgpt's Gemma-3-4b-it lists 8 heads, 4 KV
    # heads of 256 (litgpt/config.py @ 26857050).
    entry = get_model("google/gemma-3-4b-it")
    inner = entry.config["text_config"]
    assert not {"num_attention_heads", "num_key_value_heads", "head_dim"} & set(inner)
    shape = shape_from_config(entry.config, model_id=entry.id)
    assert (shape.num_attention_heads, shape.num_key_value_heads, shape.head_dim) == (8, 4, 256)


def test_mistral_small_weights_match_vllms_load() -> None:
    entry = get_model("mistralai/Mistral-Small-3.2-24B-Instruct-2506")
    assert entry.alias_of == "mistralai/Mistral-Small-3.1-24B-Instruct-2503"
    measured = 44.76 * GiB
    assert abs(entry.resolved_weights_bytes - measured) <= 0.01 * measured
    shape = shape_from_config(entry.config, model_id=entry.id)
    kv_per_token = sum(s.elements_per_token for s in shape.layers) * 2
    assert round(kv_per_token * 184_832 / GiB, 2) == 28.20  # vLLM's 184,832 tokens in 28.20 GiB


def test_glm45_air_is_the_published_106b() -> None:
    assert abs(get_model("zai-org/GLM-4.5-Air").num_parameters - 106e9) <= 0.01 * 106e9


@pytest.mark.parametrize(
    ("model_id", "billions"),
    [
        ("Qwen/Qwen3.5-27B", 27),
        ("Qwen/Qwen3.5-35B-A3B", 35),
        ("Qwen/Qwen3.5-122B-A10B", 122),
        ("Qwen/Qwen3.5-397B-A17B", 397),
        ("Qwen/Qwen3.6-27B", 27),
        ("Qwen/Qwen3.6-35B-A3B", 35),
    ],
)
def test_qwen35_sizes_are_their_names(model_id: str, billions: int) -> None:
    # Names round to the billion; the vision tower is in the count.
    assert abs(get_model(model_id).num_parameters / 1e9 - billions) < 0.02 * billions


def test_mixtral_8x22b_instruct_has_the_instruct_vocabulary() -> None:
    base = get_model("mistralai/Mixtral-8x22B-v0.1")
    instruct = get_model("mistralai/Mixtral-8x22B-Instruct-v0.1")
    assert instruct.config["vocab_size"] == 32768
    grown = parameter_counts(instruct.config).total - parameter_counts(base.config).total
    assert grown == 2 * (32768 - 32000) * 6144  # embedding and LM head rows


@pytest.mark.parametrize(
    ("model_id", "total_b", "active_b"),
    [("google/gemma-4-31B-it", 30.7, 30.7), ("google/gemma-4-26B-A4B", 25.2, 3.8)],
)
def test_gemma4_text_counts_are_the_model_cards(
    model_id: str, total_b: float, active_b: float
) -> None:
    # Model cards (google/gemma-4-31B-it, google/gemma-4-26B-A4B-it): 30.7 B; 25.2 B total,
    # 3.8 B active, the ~550 M vision encoder apart. Rounded to 0.1 B.
    counts = parameter_counts(get_model(model_id).config)
    assert round((counts.total - counts.vision) / 1e9, 1) == total_b
    assert round((counts.active_per_token) / 1e9, 1) == active_b


def test_deepseek_v3_and_r1_weigh_the_same() -> None:
    # One architecture, one quantization_config: vLLM loads the same tensors for both. The
    # model card's 685 B counts the MTP module (671 B main + 14 B MTP, DeepSeek-V3 README),
    # which vLLM skips for the target model (vllm/model_executor/models/deepseek_v2.py
    # load_weights: `get_spec_layer_idx_from_weight_name(...) is not None: continue`).
    v3, r1 = get_model("deepseek-ai/DeepSeek-V3"), get_model("deepseek-ai/DeepSeek-R1")
    assert v3.resolved_weights_bytes == r1.resolved_weights_bytes
    counts = parameter_counts(v3.config)
    assert counts.total == 671_026_419_200 and counts.mtp > 0  # MTP apart, not in the total
    # fp8 e4m3 linears (1 B) with fp32 128x128 block scales, bf16 elsewhere: between 1 and 2 B
    # per main-model parameter, below the card's 685 GB.
    assert counts.total < v3.resolved_weights_bytes < 685e9


def test_same_architecture_entries_are_weighed_alike() -> None:
    # Catalog entries whose configs count the same parameters and store them the same way
    # resolve to the same weight bytes unless one has a published safetensors total_size.
    from planner.catalog import list_models

    groups: dict[tuple[object, ...], list[tuple[str, int, bool]]] = {}
    for m in list_models():
        if m.refused:
            continue
        cfg = m.config
        quant = cfg.get("quantization_config") or text_config(cfg).get("quantization_config")
        key = (
            parameter_counts(cfg).total,
            text_config(cfg).get("model_type"),
            repr(sorted((quant or {}).items())),
        )
        measured = "total_size" in (m.weights_bytes_source or "")
        groups.setdefault(key, []).append((m.id, m.resolved_weights_bytes, measured))
    for members in groups.values():
        estimated = {w for _, w, measured in members if not measured}
        assert len(estimated) <= 1, members


@pytest.mark.parametrize(
    ("quantized", "base"),
    [
        ("nvidia/Qwen3.5-122B-A10B-NVFP4", "Qwen/Qwen3.5-122B-A10B"),
        ("nvidia/Qwen3.5-397B-A17B-NVFP4", "Qwen/Qwen3.5-397B-A17B"),
        ("nvidia/Gemma-4-26B-A4B-NVFP4", "google/gemma-4-26B-A4B"),
        ("nvidia/Gemma-4-31B-IT-NVFP4", "google/gemma-4-31B-it"),
        ("nvidia/MiniMax-M2.5-NVFP4", "MiniMaxAI/MiniMax-M2.5"),
        ("nvidia/MiniMax-M2.7-NVFP4", "MiniMaxAI/MiniMax-M2.7"),
        ("nvidia/Kimi-K2.5-NVFP4", "moonshotai/Kimi-K2.5"),
        ("moonshotai/Kimi-K2.5", "moonshotai/Kimi-K2-Instruct"),
    ],
)
def test_requantized_checkpoints_hold_the_base_parameters(quantized: str, base: str) -> None:
    # A re-quantization stores the same tensors in fewer bytes: the same parameter count and
    # KV geometry as the base config (the 122B NVFP4 config names its vision tower
    # "qwen3_5_moe_vision", transformers 5.6's spelling of the same Qwen3.5 encoder).
    q, b = get_model(quantized), get_model(base)
    assert q.num_parameters == b.num_parameters
    qs, bs = shape_from_config(q.config), shape_from_config(b.config)
    assert [s.elements_per_token for s in qs.layers] == [s.elements_per_token for s in bs.layers]
    assert q.resolved_weights_bytes < b.resolved_weights_bytes


def test_phi4_matches_vllms_load() -> None:
    # vLLM 0.19.0 serving microsoft/phi-4 on one H100 (tests/fixtures/budget_logs.jsonl,
    # vllm019-phi4-h100-tp1-llmd205, llm-d-planner#205): "Model loading took 27.39 GiB",
    # 46.08 GiB of KV cache for 241,568 tokens.
    entry = get_model("microsoft/phi-4")
    measured = 27.39 * GiB
    assert abs(entry.resolved_weights_bytes - measured) <= 0.01 * measured
    shape = shape_from_config(entry.config, model_id=entry.id)
    kv_per_token = sum(s.elements_per_token for s in shape.layers) * 2
    assert round(kv_per_token * 241_568 / GiB, 2) == 46.08


def test_qwen3_coder_30b_total_size_is_its_counted_bf16_parameters() -> None:
    # The published index's metadata.total_size (61,064,245,248 B) is exactly two bytes for each
    # parameter the config counts: every expert stored once, in bf16.
    entry = get_model("Qwen/Qwen3-Coder-30B-A3B-Instruct")
    assert entry.weights()[1] == "safetensors"
    assert entry.resolved_weights_bytes == 2 * parameter_counts(entry.config).total


@pytest.mark.parametrize(
    "model_id",
    [
        "microsoft/phi-4",
        "moonshotai/Kimi-Linear-48B-A3B-Instruct",  # the base of cyankiwi's AWQ in the log
        "meta-llama/Llama-2-7b",
        "Qwen/Qwen3-Coder-30B-A3B-Instruct",  # the bf16 repo of the logged -FP8
    ],
)
def test_models_named_in_start_up_logs_resolve_offline(model_id: str) -> None:
    # Issue #22: ids from engine start-up logs (tests/fixtures/engine_logs.jsonl, budget_logs).
    assert get_model(model_id).id == model_id


# transformers 5.24's model class built from each published config on the meta device, every
# parameter and persistent buffer counted (tied ones once), as tests/crosscheck does.
# Qwen3VL(Moe)ForConditionalGeneration: the vision tower with its three deepstack mergers,
# per-head q/k norms, and the MoE's untied LM head (the wrapper's tie_word_embeddings false
# over the text class default); 8,767,123,696 is also the 8.77 B the Hugging Face page of
# Qwen3-VL-8B-Instruct shows.
TRANSFORMERS_COUNTS = {
    "Qwen/Qwen3-VL-2B-Instruct": 2_127_532_032,
    "Qwen/Qwen3-VL-4B-Instruct": 4_437_815_808,
    "Qwen/Qwen3-VL-8B-Instruct": 8_767_123_696,
    "Qwen/Qwen3-VL-32B-Instruct": 33_357_390_064,
    "Qwen/Qwen3-VL-32B-Thinking": 33_357_390_064,
    "Qwen/Qwen3-VL-30B-A3B-Instruct": 31_070_754_032,
    "Qwen/Qwen3-VL-235B-A22B-Instruct": 235_670_022_896,
    # NemotronHForCausalLM: the E layers' routed and shared experts are up/down (relu2, no
    # gate), the shared one moe_shared_expert_intermediate_size wide, and each router's
    # e_score_correction_bias (a persistent buffer there, a tensor in the checkpoint): 31.6 B.
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": 31_577_940_288,
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4": 31_577_940_288,
    # layers_block_type without num_hidden_layers (NemotronHConfig derives it: 108 layers) and
    # moe_latent_size 2048 (experts in the latent width, fc1/fc2_latent_proj around them).
    "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16": 549_308_993_536,
    "microsoft/Phi-3-medium-4k-instruct": 13_960_238_080,
    # keras-hub's phi3_mini_128k_instruct_en preset publishes the same 3,821,079,552
    # (keras_hub/src/models/phi3/phi3_presets.py); transformers agrees on the 4k config.
    "microsoft/Phi-3-mini-128k-instruct": 3_821_079_552,
}


@pytest.mark.parametrize(("model_id", "count"), sorted(TRANSFORMERS_COUNTS.items()))
def test_counts_are_transformers(model_id: str, count: int) -> None:
    entry = get_model(model_id)
    assert parameter_counts(entry.config).total == entry.num_parameters == count
