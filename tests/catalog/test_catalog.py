"""Every bundled config parses, and its KV bytes per token match a hand derivation from the
published numbers in its config.json (the `config_source` of each entry, on the Hub).

GQA/MHA: 2 (K and V) × layers × kv_heads × head_dim × 2 bytes (16-bit cache). MLA (DeepSeek,
Kimi): one latent (kv_lora_rank + qk_rope_head_dim) per layer, no ×2, × 2 bytes. Sliding or
chunked layers cost the same per token but only for the last W tokens; they are noted as
(count, W) and checked too.
"""

from __future__ import annotations

import re

import pytest

from planner.catalog import find_model, get_gpu, get_model, list_gpus, list_models, list_refused
from planner.core.errors import ModelConfigError, UnknownIdError
from planner.core.model import shape_from_config


def gqa(layers: int, kv_heads: int, head_dim: int) -> int:
    return 2 * layers * kv_heads * head_dim * 2


def mla(layers: int, kv_lora_rank: int, rope_dim: int) -> int:
    return (kv_lora_rank + rope_dim) * layers * 2


# (id, bytes per token over all layers, (windowed layers, W) or None). Numbers: the published
# config.json's num_hidden_layers, num_key_value_heads, head_dim (or hidden_size / heads),
# kv_lora_rank, qk_rope_head_dim, sliding_window / attention_chunk_size and layer pattern.
KV_TABLE: list[tuple[str, int, tuple[int, int] | None]] = [
    ("meta-llama/Llama-3.1-8B", gqa(32, 8, 128), None),
    ("meta-llama/Llama-3.1-70B", gqa(80, 8, 128), None),
    ("nvidia/Llama-3.1-70B-Instruct-FP8", gqa(80, 8, 128), None),
    ("meta-llama/Llama-3.1-405B", gqa(126, 8, 128), None),
    ("meta-llama/Llama-3.2-1B", gqa(16, 8, 64), None),
    ("meta-llama/Llama-3.2-3B", gqa(28, 8, 128), None),
    ("meta-llama/Llama-3.3-70B-Instruct", gqa(80, 8, 128), None),
    ("meta-llama/Llama-2-7b-hf", gqa(32, 32, 128), None),
    ("meta-llama/Llama-2-13b-hf", gqa(40, 40, 128), None),
    ("meta-llama/Llama-2-70b-hf", gqa(80, 8, 128), None),
    # Llama-4: chunked local attention (8192) on RoPE layers, every 4th layer global (NoPE).
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", gqa(48, 8, 128), (36, 8192)),
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", gqa(48, 8, 128), (36, 8192)),
    ("mistralai/Mistral-7B-v0.1", gqa(32, 8, 128), (32, 4096)),
    ("mistralai/Mixtral-8x7B-v0.1", gqa(32, 8, 128), None),
    ("mistralai/Mixtral-8x22B-v0.1", gqa(56, 8, 128), None),
    # Qwen2.5 publish sliding_window but use_sliding_window false: every layer full.
    ("Qwen/Qwen2.5-1.5B", gqa(28, 2, 128), None),
    ("Qwen/Qwen2.5-3B", gqa(36, 2, 128), None),
    ("Qwen/Qwen2.5-7B", gqa(28, 4, 128), None),
    ("Qwen/Qwen2.5-14B", gqa(48, 8, 128), None),
    ("Qwen/Qwen2.5-32B", gqa(64, 8, 128), None),
    ("Qwen/Qwen2.5-72B", gqa(80, 8, 128), None),
    ("Qwen/Qwen3-0.6B", gqa(28, 8, 128), None),
    ("Qwen/Qwen3-1.7B", gqa(28, 8, 128), None),
    ("Qwen/Qwen3-4B", gqa(36, 8, 128), None),
    ("Qwen/Qwen3-8B", gqa(36, 8, 128), None),
    ("Qwen/Qwen3-14B", gqa(40, 8, 128), None),
    ("Qwen/Qwen3-32B", gqa(64, 8, 128), None),
    ("Qwen/Qwen3-32B-FP8", gqa(64, 8, 128), None),
    ("Qwen/Qwen3-30B-A3B", gqa(48, 4, 128), None),
    ("Qwen/Qwen3-30B-A3B-FP8", gqa(48, 4, 128), None),
    ("Qwen/Qwen3-235B-A22B", gqa(94, 4, 128), None),
    ("Qwen/Qwen3-235B-A22B-FP8", gqa(94, 4, 128), None),
    # Gemma-2: alternating sliding (4096) / global. Gemma-3: 5 sliding (1024) per global.
    ("google/gemma-2-9b", gqa(42, 8, 256), (21, 4096)),
    ("google/gemma-2-27b", gqa(46, 16, 128), (23, 4096)),
    ("google/gemma-3-27b-it", gqa(62, 16, 128), (52, 1024)),
    ("deepseek-ai/DeepSeek-V3", mla(61, 512, 64), None),
    ("nvidia/DeepSeek-V3.1-NVFP4", mla(61, 512, 64), None),
    ("deepseek-ai/DeepSeek-R1", mla(61, 512, 64), None),
    ("moonshotai/Kimi-K2-Instruct", mla(61, 512, 64), None),
    # gpt-oss: layer_types alternate sliding (128) and full.
    ("openai/gpt-oss-20b", gqa(24, 8, 64), (12, 128)),
    ("openai/gpt-oss-120b", gqa(36, 8, 64), (18, 128)),
    ("microsoft/Phi-3-mini-4k-instruct", gqa(32, 32, 96), (32, 2047)),
    ("MiniMaxAI/MiniMax-M2.5", gqa(62, 8, 128), None),
    ("MiniMaxAI/MiniMax-M2.7", gqa(62, 8, 128), None),
    ("XiaomiMiMo/MiMo-7B-Base", gqa(36, 8, 128), None),
    ("deepseek-ai/DeepSeek-V2-Lite", mla(27, 512, 64), None),
    ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", gqa(22, 4, 64), None),
    ("mistralai/Mistral-7B-Instruct-v0.3", gqa(32, 8, 128), None),
    # Gemma-3 1B: 5 sliding (512) per global over 26 layers; Gemma-2 2B alternates (4096).
    ("google/gemma-3-1b-it", gqa(26, 1, 256), (22, 512)),
    ("google/gemma-2-2b-it", gqa(26, 4, 256), (13, 4096)),
    # Phi-3.5 / Phi-4-mini publish sliding_window 262144, past their 131072 positions.
    ("microsoft/Phi-4-mini-instruct", gqa(32, 8, 128), (32, 262144)),
    ("microsoft/Phi-3.5-mini-instruct", gqa(32, 32, 96), (32, 262144)),
    ("Qwen/Qwen2-7B-Instruct", gqa(28, 4, 128), None),
    ("HuggingFaceTB/SmolLM2-135M-Instruct", gqa(30, 3, 64), None),
    ("HuggingFaceTB/SmolLM2-360M-Instruct", gqa(32, 5, 64), None),
    ("allenai/OLMo-2-1124-7B", gqa(32, 32, 128), None),
    ("allenai/OLMo-2-1124-13B", gqa(40, 40, 128), None),
    ("allenai/OLMo-2-0325-32B", gqa(64, 8, 128), None),
    ("codellama/CodeLlama-7b-hf", gqa(32, 32, 128), None),
    ("bigcode/starcoder2-7b", gqa(32, 4, 128), (32, 4096)),
    # Gated DeltaNet on three of every four layers (full_attention_interval 4): 12 of 48
    # layers attend; the others keep a constant state that is not per token.
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", gqa(12, 2, 256), None),
    ("zai-org/GLM-4.7", gqa(92, 8, 128), None),
    # Gemma-3 4B / 12B: 5 sliding (1024) per global. The 4B text_config leaves heads and head_dim
    # to Gemma3TextConfig's defaults; 4 KV heads × 256 is what litgpt lists for it.
    ("google/gemma-3-4b-it", gqa(34, 4, 256), (29, 1024)),
    ("google/gemma-3-12b-it", gqa(48, 8, 256), (40, 1024)),
    # 163,840 B/token is also what vLLM allocated per token for Mistral-Small-3.2 (llm-d-planner).
    ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", gqa(40, 8, 128), None),
    ("zai-org/GLM-4.5-Air", gqa(46, 8, 128), None),
    # Qwen3.5 / 3.6: full attention on every 4th layer (full_attention_interval 4).
    ("Qwen/Qwen3.5-27B", gqa(16, 4, 256), None),
    ("Qwen/Qwen3.5-35B-A3B", gqa(10, 2, 256), None),
    ("Qwen/Qwen3.5-122B-A10B", gqa(12, 2, 256), None),
    ("Qwen/Qwen3.5-397B-A17B", gqa(15, 2, 256), None),
    ("Qwen/Qwen3.6-27B", gqa(16, 4, 256), None),
    ("Qwen/Qwen3.6-35B-A3B", gqa(10, 2, 256), None),
    # Gemma-4: every 6th layer global, global_head_dim 512 with num_global_key_value_heads
    # (attention_k_eq_v); the other layers slide over 1024 tokens with head_dim 256.
    ("google/gemma-4-31B-it", gqa(50, 16, 256) + gqa(10, 4, 512), (50, 1024)),
    ("google/gemma-4-26B-A4B", gqa(25, 8, 256) + gqa(5, 2, 512), (25, 1024)),
    # Issue #22, first batch: configs copied in ai-dynamo/aiconfigurator, inference-sim, pal and
    # the hybrid fixtures (each entry's copied_from / notes).
    ("Qwen/Qwen3-Coder-480B-A35B-Instruct", gqa(62, 8, 128), None),
    ("nvidia/MiniMax-M2.5-NVFP4", gqa(62, 8, 128), None),
    ("nvidia/MiniMax-M2.7-NVFP4", gqa(62, 8, 128), None),
    ("nvidia/Gemma-4-26B-A4B-NVFP4", gqa(25, 8, 256) + gqa(5, 2, 512), (25, 1024)),
    ("nvidia/Gemma-4-31B-IT-NVFP4", gqa(50, 16, 256) + gqa(10, 4, 512), (50, 1024)),
    ("nvidia/Qwen3.5-122B-A10B-NVFP4", gqa(12, 2, 256), None),
    ("nvidia/Qwen3-235B-A22B-NVFP4", gqa(94, 4, 128), None),
    ("nvidia/Qwen3.5-397B-A17B-NVFP4", gqa(15, 2, 256), None),
    ("moonshotai/Kimi-K2.5", mla(61, 512, 64), None),
    ("nvidia/Kimi-K2.5-NVFP4", mla(61, 512, 64), None),
    ("nvidia/Kimi-K2.6-NVFP4", mla(61, 512, 64), None),
    ("nvidia/Kimi-K2.7-Code-NVFP4", mla(61, 512, 64), None),
    # hybrid_override_pattern: 10 "*" (attention) of 118 layers; head_dim 8192 / 64.
    ("nvidia/Nemotron-H-56B-Base-8K", gqa(10, 8, 128), None),
    ("mistralai/Mistral-Nemo-Instruct-2407", gqa(40, 8, 128), None),
    ("codellama/CodeLlama-34b-Instruct-hf", gqa(48, 8, 128), None),
    ("01-ai/Yi-34B", gqa(60, 8, 128), None),
    ("RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic", gqa(48, 8, 128), (36, 8192)),
    # phi-4 publishes sliding_window 16384, its max_position_embeddings.
    ("microsoft/phi-4", gqa(40, 10, 128), (40, 16384)),
    # Kimi-Linear: MLA on the 7 full_attn_layers, Kimi delta attention (a state) on the 20 others.
    ("moonshotai/Kimi-Linear-48B-A3B-Instruct", mla(7, 512, 64), None),
    # granite-4.0-h-tiny: 4 "attention" of 40 layer_types, head_dim 1536 / 12.
    ("ibm-granite/granite-4.0-h-tiny", gqa(4, 4, 128), None),
    # Falcon-H1: attention and Mamba2 side by side in every layer.
    ("tiiuae/Falcon-H1-7B-Instruct", gqa(44, 2, 128), None),
    # Nemotron-Nano-9B-v2: 4 "*" in hybrid_override_pattern. Jamba: attn_layer_period 8.
    ("nvidia/NVIDIA-Nemotron-Nano-9B-v2", gqa(4, 8, 128), None),
    ("ai21labs/AI21-Jamba-Mini-1.6", gqa(4, 8, 128), None),
    ("Qwen/Qwen3-Coder-30B-A3B-Instruct", gqa(48, 4, 128), None),
    # Issue #22, second batch. Qwen3-VL: text_config layers x KV heads x head_dim, every layer
    # full (no sliding_window, no layer_types).
    ("Qwen/Qwen3-VL-2B-Instruct", gqa(28, 8, 128), None),
    ("Qwen/Qwen3-VL-4B-Instruct", gqa(36, 8, 128), None),
    ("Qwen/Qwen3-VL-8B-Instruct", gqa(36, 8, 128), None),
    ("Qwen/Qwen3-VL-32B-Instruct", gqa(64, 8, 128), None),
    ("Qwen/Qwen3-VL-32B-Thinking", gqa(64, 8, 128), None),
    ("Qwen/Qwen3-VL-30B-A3B-Instruct", gqa(48, 4, 128), None),
    ("Qwen/Qwen3-VL-235B-A22B-Instruct", gqa(94, 4, 128), None),
    # SmolLM3: 36 layers, 4 KV heads, 2048 / 16 = 128 (sliding_window null; no_rope_layers
    # changes positions, not the cache). granite-3.1 MoE: 24 layers, 8 KV heads, 1024 / 16.
    ("HuggingFaceTB/SmolLM3-3B", gqa(36, 4, 128), None),
    ("ibm-granite/granite-3.1-1b-a400m-instruct", gqa(24, 8, 64), None),
    # Nemotron-3-Nano: 6 "*" in hybrid_override_pattern, 2 KV heads of head_dim 128.
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", gqa(6, 2, 128), None),
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", gqa(6, 2, 128), None),
    ("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", gqa(12, 2, 128), None),
    # MLC LLM presets: CodeLlama-13b 5120 / 40 = 128, MHA; gemma-2-2b-jpn-it as gemma-2-2b
    # (alternating, 4096); Qwen2 / Qwen2.5 / Qwen1.5-MoE use_sliding_window false; TinyLlama v0.4
    # 2048 / 32 = 64.
    ("codellama/CodeLlama-13b-hf", gqa(40, 40, 128), None),
    ("google/gemma-2-2b-jpn-it", gqa(26, 4, 256), (13, 4096)),
    ("Qwen/Qwen2.5-3B-Instruct", gqa(36, 2, 128), None),
    ("Qwen/Qwen2-0.5B-Instruct", gqa(24, 2, 64), None),
    ("Qwen/Qwen2-1.5B-Instruct", gqa(28, 2, 128), None),
    ("Qwen/Qwen1.5-MoE-A2.7B-Chat", gqa(24, 16, 128), None),
    ("TinyLlama/TinyLlama-1.1B-Chat-v0.4", gqa(22, 4, 64), None),
    # Phi-3 (Microsoft.ML.GenAI.Phi's copies): sliding_window 2047 on the 4k, the 128k ones'
    # 131072 / 262144 (at or past their positions); 3072 / 32 = 96, 5120 / 40 = 128.
    ("microsoft/Phi-3-mini-128k-instruct", gqa(32, 32, 96), (32, 262144)),
    ("microsoft/Phi-3-medium-4k-instruct", gqa(40, 10, 128), (40, 2047)),
    ("microsoft/Phi-3-medium-128k-instruct", gqa(40, 10, 128), (40, 131072)),
    ("meta-llama/Meta-Llama-3-8B-Instruct", gqa(32, 8, 128), None),
    ("mistralai/Mistral-Nemo-Base-2407", gqa(40, 8, 128), None),
    ("Qwen/Qwen2-0.5B", gqa(24, 2, 64), None),
]
REFUSED = {
    "deepseek-ai/DeepSeek-V3.2",
    "zai-org/GLM-5",
    "zai-org/GLM-5-FP8",
    "zai-org/GLM-5.1",
    "zai-org/GLM-5.1-FP8",
    "zai-org/GLM-5.2",
    "zai-org/GLM-5.2-FP8",
    "nvidia/GLM-5-NVFP4",
    "nvidia/GLM-5.1-NVFP4",
    "nvidia/DeepSeek-V3.2-NVFP4",
}


def test_the_table_covers_every_sizeable_entry() -> None:
    assert {m.id for m in list_models()} == {row[0] for row in KV_TABLE}
    assert {m.id for m in list_refused()} == REFUSED


@pytest.mark.parametrize(("model_id", "bytes_per_token", "windowed"), KV_TABLE)
def test_kv_bytes_per_token_match_the_hand_derivation(
    model_id: str, bytes_per_token: int, windowed: tuple[int, int] | None
) -> None:
    entry = get_model(model_id)
    shape = shape_from_config(entry.config, model_id=entry.id)
    assert sum(spec.elements_per_token for spec in shape.layers) * 2 == bytes_per_token
    got = [s.window_tokens for s in shape.layers if s.kind in ("sliding", "chunked")]
    if windowed is None:
        assert got == []
    else:
        count, window = windowed
        assert len(got) == count and set(got) == {window}


def test_entries_say_where_their_numbers_come_from() -> None:
    for m in [*list_models(), *list_refused()]:
        assert m.config_source and m.config_source.startswith("https://huggingface.co/")
        assert m.num_parameters_source
        if m.weights_bytes is not None:
            assert m.weights_bytes_source


def test_copies_are_pinned() -> None:
    # A config taken from a GitHub copy names the file at one commit (or release tag), so the
    # numbers can be checked against what was copied (a bracket may name the part of the file).
    pinned = re.compile(
        r"https://github\.com/[^/]+/[^/]+/blob/([0-9a-f]{40}|v[0-9.]+)/\S+( \(.+\))?$"
    )
    for m in [*list_models(), *list_refused()]:
        if m.copied_from:
            assert pinned.match(m.copied_from), (m.id, m.copied_from)


def test_aliases_point_at_configs() -> None:
    for m in list_models():
        if m.refused:
            continue
        for alias in m.aliases:
            served = get_model(alias.id)
            assert served.alias_of == m.id and served.id == alias.id
            shape_from_config(served.config)


def test_lookup_any_case_and_without_org() -> None:
    hit = find_model("QWEN/QWEN3-8B")
    assert hit is not None and hit[0].id == "Qwen/Qwen3-8B"
    hit = find_model("Meta-Llama-3.1-405B-Instruct")
    assert hit is not None and hit[0].id == "meta-llama/Llama-3.1-405B"
    assert find_model("acme/unknown-model") is None


def test_old_ids_still_resolve() -> None:
    for model_id in (
        "meta-llama/Llama-3.1-8B",
        "google/gemma-3-27b-it",
        "openai/gpt-oss-20b",
        "Qwen/Qwen2.5-7B",
        "microsoft/Phi-3-mini-4k-instruct",
    ):
        assert get_model(model_id).id == model_id


def test_refused_entries_refuse_by_name() -> None:
    for model_id in REFUSED:
        with pytest.raises(ModelConfigError):
            get_model(model_id)
    with pytest.raises(UnknownIdError):
        get_model("acme/unknown-model")


# The cards of the issue: H20, H800, A800, L20, L40, B200, GB200, RTX PRO 6000, MI325X, MI355X,
# Ascend 910B (ids are case-insensitive).
NEW_GPUS = [
    "h20-96gb",
    "h800-sxm-80gb",
    "a800-sxm-80gb",
    "a800-pcie-80gb",
    "l20-48gb",
    "l40-48gb",
    "b200-180gb",
    "gb200-186gb",
    "rtx-pro-6000-96gb",
    "mi325x-256gb",
    "mi355x-288gb",
    "ascend-910b-64gb",
]


@pytest.mark.parametrize("gpu_id", NEW_GPUS)
def test_new_gpus_are_listed_with_sources(gpu_id: str) -> None:
    g = get_gpu(gpu_id)
    assert g.source
    if gpu_id not in ("l40-48gb", "b200-180gb", "mi325x-256gb"):  # listed before this catalog
        assert "http" in g.source
    assert g.memory_bytes > 0 and g.bandwidth_bytes_per_s > 0


def test_gpu_ids_are_unique() -> None:
    ids = [g.id for g in list_gpus()]
    assert len(ids) == len(set(ids))


def test_qwen3_next_by_id_plans_like_its_pasted_config() -> None:
    from planner.core.schema import PlanRequest
    from planner.service import plan

    config = get_model("Qwen/Qwen3-Next-80B-A3B-Instruct").config
    common = {"gpu": "H100-SXM-80GB", "tensor_parallel_size": 4, "context_tokens": 32768}
    by_id = plan(
        PlanRequest.model_validate({"model": "Qwen/Qwen3-Next-80B-A3B-Instruct", **common})
    )
    pasted = plan(PlanRequest.model_validate({"model": config, **common}))
    assert by_id.kv_bytes_per_token == pasted.kv_bytes_per_token == 24576
    assert by_id.capacity is not None and pasted.capacity is not None
    assert by_id.capacity.kv_budget_bytes == pasted.capacity.kv_budget_bytes
    assert by_id.capacity.max_requests == pasted.capacity.max_requests


def test_every_gpu_names_its_link_with_a_source() -> None:
    """The expected step's all-reduce term divides by these: each GPU says which link, how
    fast one way, one hop's latency, and where the figures come from."""
    from planner.catalog import list_gpus

    for g in list_gpus():
        assert g.link and g.link_source, g.id
        assert g.link_bandwidth_bytes_per_s is not None and g.link_latency_seconds is not None
        assert 16e9 <= g.link_bandwidth_bytes_per_s <= 1e12, g.id
        assert 0.1e-6 <= g.link_latency_seconds <= 10e-6, g.id
