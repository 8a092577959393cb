"""Weights a decode step reads for a mixture-of-experts model (pure).

A step over B tokens routes each token to top-k of E experts per MoE layer. If the routing is
uniform and independent across tokens, one expert is missed by a token with probability
1 − k/E, so the expected number of distinct experts a layer reads is E·(1 − (1 − k/E)^B):
exactly k at B = 1, approaching E as B grows. Real routers are skewed, which touches fewer
distinct experts — the uniform figure is the larger, so the bytes below never undercount
what uniform routing reads and never exceed reading every expert.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.core.params import WeightBytes

NOTE_UNIFORM_ROUTING = "moe-uniform-routing"


def expected_distinct_experts(num_experts: int, top_k: int, tokens: int) -> float:
    """E·(1 − (1 − k/E)^B): distinct experts B tokens touch in one layer, uniform routing."""
    if num_experts <= 0 or top_k <= 0 or tokens <= 0:
        return 0.0
    if top_k >= num_experts:
        return float(num_experts)
    miss = 1.0 - top_k / num_experts
    value = num_experts * (1.0 - miss**tokens)
    # Exact at B = 1 (floating point gives k within an ulp); never past E or k·B.
    return float(top_k) if tokens == 1 else min(value, float(num_experts), float(top_k * tokens))


@dataclass(frozen=True, slots=True)
class DecodeWeightRead:
    """Weight bytes one decode step streams at a batch: dense part + touched experts."""

    batch_tokens: int
    dense_bytes: int
    experts_per_layer: float  # expected distinct experts per MoE layer
    expert_bytes: int  # one expert of one layer
    moe_layers: int

    @property
    def expert_read_bytes(self) -> int:
        return round(self.moe_layers * self.experts_per_layer * self.expert_bytes)

    @property
    def total_bytes(self) -> int:
        return self.dense_bytes + self.expert_read_bytes


def decode_weight_read(weights: WeightBytes, batch_tokens: int) -> DecodeWeightRead:
    """Bytes of weights one decode step over `batch_tokens` tokens reads (dense models: the
    dense part at every batch; the input embedding table is indexed, not streamed)."""
    distinct = expected_distinct_experts(weights.num_experts, weights.top_k, batch_tokens)
    return DecodeWeightRead(
        batch_tokens=batch_tokens,
        dense_bytes=weights.dense_read,
        experts_per_layer=distinct,
        expert_bytes=weights.expert,
        moe_layers=weights.moe_layers,
    )


def decode_floor_bytes(weights: WeightBytes, batch_tokens: int, kv_read_bytes: int) -> int:
    """Bytes a decode step must move at least: touched weights plus the batch's KV reads."""
    return decode_weight_read(weights, batch_tokens).total_bytes + kv_read_bytes


__all__ = [
    "NOTE_UNIFORM_ROUTING",
    "DecodeWeightRead",
    "decode_floor_bytes",
    "decode_weight_read",
    "expected_distinct_experts",
]
