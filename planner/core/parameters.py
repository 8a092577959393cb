"""A parameter estimate from a model's shape, for configs without a published count."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # model.py re-exports this function
    from planner.core.model import ModelShape


def estimate_parameters(shape: ModelShape) -> int | None:
    """Parameter estimate for configs without a published count (for weights bytes).

    Embedding + LM head + per layer (Q,O: hidden·Hq·d each; K,V: hidden·Hkv·d each; gated MLP
    3·hidden·intermediate, or for mixture-of-experts every expert's 3·hidden·width plus shared
    experts and the router). Checks: Mixtral-8x7B 46.7 B, Qwen3-30B-A3B 30.5 B. MLA configs
    return None: their projections need the checkpoint.
    """
    if shape.is_mla or shape.hidden_size is None:
        return None
    if shape.num_experts is not None:
        if shape.expert_intermediate_size is None:
            return None
        h = shape.hidden_size
        d = shape.head_dim
        attn = 2 * h * shape.num_attention_heads * d + 2 * h * shape.num_key_value_heads * d
        experts = 3 * h * shape.expert_intermediate_size * shape.num_experts
        shared = 3 * h * (shape.shared_expert_intermediate_size or 0)
        router = h * shape.num_experts
        emb = 2 * h * (shape.vocab_size or 0)
        return emb + shape.num_hidden_layers * (attn + experts + shared + router)
    if shape.intermediate_size is None:
        return None
    h = shape.hidden_size
    d = shape.head_dim
    attn = 2 * h * shape.num_attention_heads * d + 2 * h * shape.num_key_value_heads * d
    mlp = 3 * h * shape.intermediate_size
    emb = 2 * h * (shape.vocab_size or 0)
    return emb + shape.num_hidden_layers * (attn + mlp)


__all__ = ["estimate_parameters"]
