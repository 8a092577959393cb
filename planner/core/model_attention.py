"""The attention layers of a hybrid config, by its `layer_types` word."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from planner.core.errors import ModelConfigError
from planner.core.model import MAX_HEAD_DIM, LayerKind, _attention_spec, _int_field
from planner.core.specs import LayerSpec, MLASpec


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
                f"num_attention_heads {num_heads} is not a multiple of num_key_value_heads "
                f"{kv_heads}; GQA needs whole query groups",
            )
        v_dim = _int_field(cfg, "v_head_dim", hi=MAX_HEAD_DIM) or head_dim
        window = _int_field(cfg, "sliding_window", hi=1 << 30)
        kind: LayerKind = "full"
        if word == "sliding_attention":
            if window is None:
                raise ModelConfigError(
                    ("model", "sliding_window"), "sliding_attention layers need sliding_window"
                )
            kind = "sliding"
        elif word == "chunked_attention":
            window = _int_field(cfg, "attention_chunk_size", hi=1 << 30)
            if window is None:
                raise ModelConfigError(
                    ("model", "attention_chunk_size"),
                    "chunked_attention layers need attention_chunk_size",
                )
            kind = "chunked"
        return _attention_spec(kind, kv_heads, head_dim, v_dim, window)

    return make


__all__ = ["attention_factory"]
