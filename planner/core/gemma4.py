"""Gemma-4's decoder layers as transformers 5.24 builds them (`models/gemma4/`) and vLLM 0.33
loads them (`model_executor/models/gemma4.py`, which reads transformers' `per_layer_config`).

* Full-attention layers use `global_head_dim` (512 when the config leaves it out:
  Gemma4TextConfig pops it with that default) for queries, keys and values; with
  `attention_k_eq_v` they also have `num_global_key_value_heads` KV heads and no v_proj (the
  keys are the values; vLLM loads k_proj into both halves of its qkv_proj and caches K and V
  alike). Sliding layers keep `head_dim` and `num_key_value_heads`.
* Every layer has Q/K norms over its head size and four RMSNorms plus a `layer_scalar` buffer.
* With `enable_moe_block` each layer runs the dense MLP and a routed block side by side: the
  router has a projection, an input scale and one scale per expert, and the block three more
  norms. (The experts themselves are counted as any MoE layer's.)
* Per-layer input embeddings (`hidden_size_per_layer_input` > 0, the E2B/E4B models) are not
  counted: a config with them is refused rather than under-weighed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from planner.core.errors import ModelConfigError

GEMMA4_TYPES = frozenset({"gemma4", "gemma4_text"})
_GLOBAL_HEAD_DIM = 512  # Gemma4TextConfig.__post_init__: kwargs.pop("global_head_dim", 512)


def _positive(cfg: Mapping[str, Any], key: str) -> int | None:
    v = cfg.get(key)
    return v if type(v) is int and v > 0 else None


def is_global(cfg: Mapping[str, Any], i: int) -> bool:
    """Whether decoder layer i is a full-attention layer (`layer_types`)."""
    types = cfg.get("layer_types")
    return isinstance(types, list) and i < len(types) and types[i] == "full_attention"


def global_attention(cfg: Mapping[str, Any], kv_heads: int) -> tuple[int, int, bool]:
    """(head size, KV heads, keys-are-values) of a full-attention layer."""
    k_eq_v = cfg.get("attention_k_eq_v") is True
    global_kv = _positive(cfg, "num_global_key_value_heads")
    heads = global_kv if k_eq_v and global_kv is not None else kv_heads
    return _positive(cfg, "global_head_dim") or _GLOBAL_HEAD_DIM, heads, k_eq_v


Row = tuple[str, Literal["attention", "mlp"], int, int]  # module, kind, in and out features


def gemma4_layer_rows(
    cfg: Mapping[str, Any],
    i: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    dense_width: int,
    moe_experts: int,
) -> tuple[list[Row], int]:
    """Linears (besides routed experts) and other parameters of decoder layer i."""
    if (_positive(cfg, "hidden_size_per_layer_input") or 0) > 0:
        raise ModelConfigError(
            ("model", "hidden_size_per_layer_input"),
            "model.gemma4_per_layer_embeddings",
        )
    at = f"model.layers.{i}.self_attn"
    size, kv, k_eq_v = (
        global_attention(cfg, kv_heads) if is_global(cfg, i) else (head_dim, kv_heads, False)
    )
    rows: list[Row] = [
        (f"{at}.q_proj", "attention", hidden, heads * size),
        (f"{at}.k_proj", "attention", hidden, kv * size),
        (f"{at}.o_proj", "attention", heads * size, hidden),
    ]
    if not k_eq_v:
        rows.append((f"{at}.v_proj", "attention", hidden, kv * size))
    other = 2 * size + 1  # q_norm, k_norm (v_norm has no weight), layer_scalar
    if moe_experts:
        mlp = f"model.layers.{i}.mlp"
        rows += [
            (f"{mlp}.gate_proj", "mlp", hidden, dense_width),
            (f"{mlp}.up_proj", "mlp", hidden, dense_width),
            (f"{mlp}.down_proj", "mlp", dense_width, hidden),
        ]
        other += 3 * hidden + hidden + moe_experts  # 3 block norms, router scale, expert scales
    return rows, other


__all__ = ["GEMMA4_TYPES", "gemma4_layer_rows", "global_attention", "is_global"]
