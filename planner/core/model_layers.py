"""Attention layers from a config: per-layer windows (`layer_types`, Gemma/gpt-oss alternation,
`sliding_window_pattern`, Qwen2 `max_window_layers`, Llama-4 chunks) and the attention layers
of hybrid configs, by their `layer_types` word."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from planner.core.config_fields import int_field as _int_field
from planner.core.errors import ModelConfigError
from planner.core.specs import (
    ChunkedLocalSpec,
    FullAttentionSpec,
    LayerSpec,
    MLASpec,
    SlidingWindowSpec,
)

LayerKind = Literal["full", "sliding", "chunked", "mla"]
MAX_HEAD_DIM = 65536

# Architectures whose configs imply alternation when `layer_types` is absent.
_ALTERNATE_2 = {"gemma2", "gpt_oss"}
_GEMMA3 = {"gemma3", "gemma3_text"}


def _window_kinds(
    cfg: Mapping[str, Any], num_layers: int, model_type: str | None
) -> list[tuple[LayerKind, int | None]]:
    """Per layer: ('full', None), ('sliding', W) or ('chunked', chunk)."""
    window = _int_field(cfg, "sliding_window", hi=1 << 30)
    if cfg.get("use_sliding_window") is False:
        # Qwen2/2.5 publish a window but disable it (vLLM and HF both ignore it then).
        window = None
    chunk = _int_field(cfg, "attention_chunk_size", hi=1 << 30)

    layer_types = cfg.get("layer_types")
    if layer_types is not None:
        if not isinstance(layer_types, list) or len(layer_types) != num_layers:
            raise ModelConfigError(
                ("model", "layer_types"), "model.layer_strings_invalid_2", num_layers=num_layers
            )
        out: list[tuple[LayerKind, int | None]] = []
        for i, kind in enumerate(layer_types):
            if kind in ("full_attention", "attention"):
                # granite-4.0 (granitemoehybrid) spells full attention "attention".
                out.append(("full", None))
            elif kind == "sliding_attention":
                w = _int_field(cfg, "sliding_window", hi=1 << 30)
                if w is None:
                    raise ModelConfigError(
                        ("model", "sliding_window"), "model.layer_type_sliding_without_window", i=i
                    )
                out.append(("sliding", w))
            elif kind == "chunked_attention":
                if chunk is None:
                    raise ModelConfigError(
                        ("model", "attention_chunk_size"),
                        "model.layer_type_chunked_without_size",
                        i=i,
                    )
                out.append(("chunked", chunk))
            else:
                raise ModelConfigError(
                    ("model", "layer_types", i), "model.layer_type_unsupported", kind=kind
                )
        return out

    if chunk is not None and model_type in ("llama4", "llama4_text"):
        # Llama-4: RoPE layers use chunked local attention, NoPE layers (every 4th) are global.
        no_rope = cfg.get("no_rope_layers")
        if isinstance(no_rope, list) and len(no_rope) == num_layers:
            return [("chunked", chunk) if flag else ("full", None) for flag in no_rope]
        interval = _int_field(cfg, "no_rope_layer_interval", hi=num_layers) or 4
        return [
            ("full", None) if (i + 1) % interval == 0 else ("chunked", chunk)
            for i in range(num_layers)
        ]

    if window is None:
        return [("full", None)] * num_layers

    if model_type in _ALTERNATE_2:
        return [("sliding", window) if (i + 1) % 2 else ("full", None) for i in range(num_layers)]
    pattern = _int_field(cfg, "sliding_window_pattern", hi=num_layers + 1)
    if pattern is None and model_type in _GEMMA3:
        pattern = 6
    if pattern is not None:
        return [
            ("sliding", window) if (i + 1) % pattern else ("full", None) for i in range(num_layers)
        ]
    if model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe") and cfg.get("use_sliding_window"):
        first = _int_field(cfg, "max_window_layers", lo=0, hi=num_layers) or 0
        return [("sliding", window) if i >= first else ("full", None) for i in range(num_layers)]
    # Mistral-7B-v0.1, Phi-3-mini: the model-level window applies to every layer.
    return [("sliding", window)] * num_layers


def _attention_spec(
    kind: LayerKind, kv_heads: int, head_size: int, head_size_v: int, window: int | None
) -> LayerSpec:
    if kind == "sliding" and window is not None:
        return SlidingWindowSpec(kv_heads, head_size, head_size_v, window)
    if kind == "chunked" and window is not None:
        return ChunkedLocalSpec(kv_heads, head_size, head_size_v, window)
    return FullAttentionSpec(kv_heads, head_size, head_size_v)


def attention_factory(
    cfg: Mapping[str, Any],
    is_mla: bool,
    kv_lora_rank: int | None,
    rope_dim: int | None,
    kv_heads: int,
    num_heads: int,
    head_dim: int,
) -> Callable[[str], LayerSpec]:
    """The attention spec of a hybrid's attention layers, by `layer_types` word."""

    def make(word: str) -> LayerSpec:
        if is_mla and kv_lora_rank is not None:
            return MLASpec.of(kv_lora_rank, rope_dim or 0)
        if num_heads % kv_heads:
            raise ModelConfigError(
                ("model", "num_key_value_heads"),
                "model.heads_not_multiple_of_kv_heads",
                num_heads=num_heads,
                kv_heads=kv_heads,
            )
        v_dim = _int_field(cfg, "v_head_dim", hi=MAX_HEAD_DIM) or head_dim
        window = _int_field(cfg, "sliding_window", hi=1 << 30)
        kind: LayerKind = "full"
        if word == "sliding_attention":
            if window is None:
                raise ModelConfigError(("model", "sliding_window"), "model.sliding_needs_window")
            kind = "sliding"
        elif word == "chunked_attention":
            window = _int_field(cfg, "attention_chunk_size", hi=1 << 30)
            if window is None:
                raise ModelConfigError(
                    ("model", "attention_chunk_size"),
                    "model.chunked_needs_chunk_size",
                )
            kind = "chunked"
        return _attention_spec(kind, kv_heads, head_dim, v_dim, window)

    return make


__all__ = ["LayerKind", "attention_factory"]
