"""Config forms that change which caches a decoder layer keeps, applied after the attention kinds
are read (`model.shape_from_config` calls `apply_layer_forms` once).

* Gemma-4 full-attention layers: `global_head_dim` wide, with `num_global_key_value_heads` KV
  heads when `attention_k_eq_v` (planner.core.gemma4; vLLM caches K and V for them alike).
* KV sharing across layers (Gemma-3n, Gemma-4 `num_kv_shared_layers`): the last N layers attend
  over an earlier layer's cache and keep none (vLLM gives a layer with
  `kv_sharing_target_layer_name` no spec, `v1/worker/gpu/attn_utils.get_kv_cache_spec`;
  transformers makes it a cache-less "reuse" layer).
* DeepSeek-V3.2 sparse attention: each MLA layer also keeps its indexer's key cache.
* Model types whose caches kvplan does not model are refused by name, never sized as plain
  attention.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from planner.core.errors import ModelConfigError
from planner.core.gemma4 import GEMMA4_TYPES, global_attention, is_global
from planner.core.notes import Note, note
from planner.core.specs import (
    FullAttentionSpec,
    IndexerSpec,
    LayerSpec,
    MLASpec,
    SharedKVSpec,
    SparseMLASpec,
)

if TYPE_CHECKING:  # model.py imports this module
    from planner.core.model import ModelShape

# Model files that implement `num_kv_shared_layers` (vLLM gemma3n.py, gemma4.py; transformers'
# Gemma3nTextConfig.kv_sharing_modes).
_KV_SHARING_TYPES = {"gemma3n", "gemma3n_text", "gemma4", "gemma4_text"}
# DeepSeek sparse attention (vLLM `is_deepseek_v32`): MLA plus a lightning indexer per layer.
_SPARSE_MLA_TYPES = {"deepseek_v32", "glm_moe_dsa"}
# Indexer keys are fp8 with one fp32 scale per quant block of 128 values (DeepseekV32Indexer).
_INDEXER_QUANT_BLOCK = 128
# Caches vLLM keeps that kvplan does not size (yet): refused by name instead of sized as
# attention. Values say what the model keeps.
_UNMODELLED: dict[str, str] = {
    "deepseek_v4": "sliding-window MLA and compressed-KV caches (SlidingWindowMLASpec)",
    "deepseek_v41": "sliding-window MLA and compressed-KV caches (SlidingWindowMLASpec)",
    "whisper": "encoder-decoder cross-attention caches (CrossAttentionSpec)",
    "mllama_text_model": "cross-attention caches over image tokens (CrossAttentionSpec)",
}


def apply_layer_forms(
    cfg: Mapping[str, Any], layers: tuple[LayerSpec, ...], model_type: str | None
) -> tuple[LayerSpec, ...]:
    """The decoder layers with KV sharing and sparse-attention caches applied."""
    if model_type in _UNMODELLED:
        raise ModelConfigError(
            ("model", "model_type"),
            "model.cache_unmodelled",
            model_type=model_type,
            cache=_UNMODELLED[model_type],
        )
    if cfg.get("is_encoder_decoder") is True:
        raise ModelConfigError(
            ("model", "is_encoder_decoder"),
            "model.encoder_decoder",
            model_type=model_type or "this model",
        )
    sinks = cfg.get("param_sink_number")
    if isinstance(sinks, int) and not isinstance(sinks, bool) and sinks > 0:
        # openpangu.py: StaticSinkAttention keeps sink_len sink tokens' KV per layer
        # (SinkFullAttentionSpec); gpt-oss's learned sinks are per-head logits and cache nothing.
        raise ModelConfigError(
            ("model", "param_sink_number"), "model.attention_sinks_unmodelled", sinks=sinks
        )
    if cfg.get("interleaved_sliding_window") is not None and any(
        isinstance(s, MLASpec) for s in layers
    ):
        raise ModelConfigError(
            ("model", "interleaved_sliding_window"),
            "model.sliding_window_mla_unmodelled",
        )
    if model_type in GEMMA4_TYPES:
        layers = tuple(_gemma4_global(cfg, i, spec) for i, spec in enumerate(layers))
    out = _kv_sharing(cfg, layers, model_type)
    if model_type in _SPARSE_MLA_TYPES:
        out = _sparse_mla(cfg, out)
    return out


def mlp_width(cfg: Mapping[str, Any]) -> int | None:
    """`intermediate_size`; Gemma-3n lists one per layer (their mean, for the weights estimate)."""
    raw = cfg.get("intermediate_size")
    if isinstance(raw, list) and raw and all(type(x) is int and 0 < x <= 1 << 24 for x in raw):
        return sum(raw) // len(raw)
    if raw is not None and (isinstance(raw, bool) or not isinstance(raw, int)):
        raise ModelConfigError(("model", "intermediate_size"), "model.not_integer_or_list", raw=raw)
    if raw is not None and not 1 <= raw <= 1 << 24:
        raise ModelConfigError(
            ("model", "intermediate_size"),
            "model.value_out_of_range_from_1",
            hi=1 << 24,
            value=raw,
        )
    return raw


def _gemma4_global(cfg: Mapping[str, Any], i: int, spec: LayerSpec) -> LayerSpec:
    if not isinstance(spec, FullAttentionSpec) or not is_global(cfg, i):
        return spec
    size, kv_heads, _ = global_attention(cfg, spec.kv_heads)
    return FullAttentionSpec(kv_heads, size, size)


def _kv_sharing(
    cfg: Mapping[str, Any], layers: tuple[LayerSpec, ...], model_type: str | None
) -> tuple[LayerSpec, ...]:
    shared = cfg.get("num_kv_shared_layers")
    if shared is None or shared == 0:
        return layers
    n = len(layers)
    if isinstance(shared, bool) or not isinstance(shared, int) or not 0 <= shared < n:
        raise ModelConfigError(
            ("model", "num_kv_shared_layers"),
            "model.kv_shared_layers_range",
            most=n - 1,
            shared=shared,
        )
    if model_type not in _KV_SHARING_TYPES:
        raise ModelConfigError(
            ("model", "num_kv_shared_layers"),
            "model.kv_sharing_unknown",
            types=", ".join(sorted(_KV_SHARING_TYPES)),
            model_type=model_type,
            shared=shared,
        )
    first = n - shared
    out = list(layers)
    for i in range(first, n):
        target = _sharing_target(layers, first, i, model_type)
        if target is not None:
            out[i] = SharedKVSpec(0, 0, 0, target)
    return tuple(out)


def _sharing_target(
    layers: tuple[LayerSpec, ...], first: int, i: int, model_type: str | None
) -> int | None:
    """The layer whose cache layer `i` reads, as the model file picks it; None when there is
    none and the layer keeps its own cache (vLLM then names no target)."""
    sliding = layers[i].is_window
    if model_type in ("gemma3n", "gemma3n_text"):
        # gemma3n.py: the last full layer is 1 before the shared ones, the last sliding one 2.
        target = first - (2 if sliding else 1)
        return target if target >= 0 else None
    # gemma4.py: the last non-shared layer of the same attention type.
    for j in range(first - 1, -1, -1):
        if layers[j].is_window == sliding and layers[j].window_tokens == layers[i].window_tokens:
            return j
    return None


def _sparse_mla(cfg: Mapping[str, Any], layers: tuple[LayerSpec, ...]) -> tuple[LayerSpec, ...]:
    head = cfg.get("index_head_dim")
    if head is None:
        raise ModelConfigError(
            ("model", "index_head_dim"),
            "model.sparse_mla_needs_index_head_dim",
        )
    if isinstance(head, bool) or not isinstance(head, int) or not 1 <= head <= 65536:
        raise ModelConfigError(("model", "index_head_dim"), "model.not_integer", value=head)
    indexer_bytes = head + head // _INDEXER_QUANT_BLOCK * 4
    out: list[LayerSpec] = []
    for spec in layers:
        if isinstance(spec, MLASpec):
            mla = SparseMLASpec(spec.kv_heads, spec.head_size, spec.head_size_v, indexer_bytes)
            out.append(mla)
        else:
            out.append(spec)
    return tuple(out)


def layer_form_notes(shape: ModelShape) -> list[Note]:
    """Notes on layers without a cache of their own and on caches beside attention."""
    out: list[Note] = []
    shared = sum(1 for s in shape.layers if not s.owns_kv)
    if shared:
        n = shape.num_hidden_layers
        out.append(note("model.kv_shared_layers", shared=shared, layers=n, owning=n - shared))
    for g in shape.groups:
        if isinstance(g.spec, IndexerSpec):
            out.append(
                note("model.sparse_mla_indexer", layers=g.layers, indexer_bytes=g.spec.head_size)
            )
    return out


__all__ = ["apply_layer_forms", "layer_form_notes", "mlp_width"]
