"""What SGLang 0.5.23 does differently for a multimodal model (`configs/model_config.py`
`is_multimodal_model`: the config's architecture is one of `multimodal_model_archs`, and not one
whose multimodal input SGLang leaves off unless --enable-multimodal: Gemma-3, Llama-4):

- the automatic mem_fraction_static is scaled for the vision encoder
  (`arg_groups/memory_hook.py` adjust_mem_fraction_for_vlm): × 0.95 × clamp(1 − 0.1 ×
  (complexity − 1), 0.8, 1.05), complexity = vision layers × vision hidden² / (24 × 1024²), read
  from `vision_config` (num_hidden_layers, default 24; hidden_size, default 1024), unrounded;
- the KV budget keeps SGLANG_VLM_CACHE_SIZE_MB (100 MiB) for the multimodal embedding cache
  (`mem_cache/kv_cache_configurator.py` mm_runtime_reservation_gb, CPU feature transport);
- prefill CUDA graphs are off (`arg_groups/cuda_graph_hook.py`
  disable_breakable_cudagraph_if_incompatible: a multimodal model, except the architectures whose
  language-model prefill SGLang captures, `multimodal_breakable_cuda_graph_supported_model_archs`;
  and a KDA hybrid, Kimi-Linear).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.core.engines.sglang.releases import KDA_NO_PREFILL_GRAPHS_SINCE, VERIFIED
from planner.core.engines.versions import Version, since

# The multimodal architectures kvplan's catalog serves through SGLang (of multimodal_model_archs).
MULTIMODAL_ARCHS = frozenset({
    "Gemma3ForConditionalGeneration", "Gemma4ForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Llama4ForConditionalGeneration", "Mistral3ForConditionalGeneration",
    "Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration",
    "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
    "LlavaForConditionalGeneration", "MllamaForConditionalGeneration",
    "KimiVLForConditionalGeneration", "PixtralForConditionalGeneration",
})  # fmt: skip
# Multimodal architectures that keep prefill CUDA graphs (model_config.py).
PREFILL_GRAPH_ARCHS = frozenset({
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
})  # fmt: skip
# model_config.py mm_disabled_models: multimodal off by default (text served alone).
MULTIMODAL_OFF_ARCHS = frozenset({
    "Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration",
})  # fmt: skip
# KDA hybrids: prefill CUDA graphs off (uses_kda_attention) from KDA_NO_PREFILL_GRAPHS_SINCE.
NO_PREFILL_GRAPH_ARCHS = frozenset({"KimiLinearForCausalLM"})
VLM_CACHE_BYTES = 100 << 20  # SGLANG_VLM_CACHE_SIZE_MB
_BASE_REDUCTION = 0.95
_BASELINE_VIT = 24 * 1024**2


def is_multimodal(architectures: tuple[str, ...]) -> bool:
    """ModelConfig.is_multimodal, decided by the first architecture."""
    first = architectures[0] if architectures else None
    return first in MULTIMODAL_ARCHS and first not in MULTIMODAL_OFF_ARCHS


def prefill_graphs_kept(architectures: tuple[str, ...], version: Version = VERIFIED) -> bool:
    """Whether SGLang keeps its default prefill CUDA graphs for this architecture."""
    kda_off = since(version, KDA_NO_PREFILL_GRAPHS_SINCE)
    if kda_off and any(a in NO_PREFILL_GRAPH_ARCHS for a in architectures):
        return False
    return not is_multimodal(architectures) or any(a in PREFILL_GRAPH_ARCHS for a in architectures)


def vlm_fraction(fraction: float, config: Mapping[str, Any] | None) -> float:
    """adjust_mem_fraction_for_vlm on the automatic fraction (a config without vision_config
    keeps it)."""
    vision = config.get("vision_config") if config is not None else None
    if not isinstance(vision, Mapping):
        return fraction
    layers = vision.get("num_hidden_layers", 24)
    hidden = vision.get("hidden_size", 1024)
    if not isinstance(layers, int) or not isinstance(hidden, int):
        return fraction
    complexity = layers * hidden**2 / _BASELINE_VIT
    factor = max(0.8, min(1.05, 1.0 - 0.1 * (complexity - 1.0)))
    return fraction * (_BASE_REDUCTION * factor)


__all__ = [
    "MULTIMODAL_ARCHS",
    "VLM_CACHE_BYTES",
    "is_multimodal",
    "prefill_graphs_kept",
    "vlm_fraction",
]
