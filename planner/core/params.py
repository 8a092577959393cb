"""Parameter counts from a Hugging Face `config.json` object (pure).

Total, active per token, the dense part, one routed expert, experts and top-k, shared experts
and MoE layers, from `planner.core.layout`'s walk of the decoder (exact against transformers'
own modules for every bundled config). Multi-token-prediction layers
(`num_nextn_predict_layers`) are reported apart and left out of the total: engines skip them
unless speculative decoding is on, and the published totals (DeepSeek-V3 671 B) leave them out.
Weight bytes as stored live in `planner.core.quant` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planner.core.layout import Decoder, Linear, _need, decoder, vision_parameters
from planner.core.model import text_config
from planner.core.quant import WeightBytes, weight_bytes


@dataclass(frozen=True, slots=True)
class ParameterCounts:
    total: int  # every parameter the engine loads (MTP layers excluded)
    active_per_token: int  # total minus the routed experts a token does not use
    dense: int  # total minus all routed experts (attention, dense MLPs, shared experts, ...)
    embedding: int  # the input embedding table
    lm_head: int  # 0 when tied to the embedding
    expert: int  # one routed expert of one MoE layer (0 for dense models)
    num_experts: int
    top_k: int
    num_shared_experts: int
    moe_layers: int
    mtp: int  # parameters of multi-token-prediction layers (not in total)
    vision: int = 0  # vision encoder + projector of a multimodal repo (in total; estimate)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and self.moe_layers > 0

    @property
    def active_without_embedding_lookup(self) -> int:
        """Active parameters a decode step multiplies by: the input table is only indexed
        (a few rows), unless it doubles as the LM head."""
        return self.active_per_token - (self.embedding if self.lm_head else 0)


def _mtp_parameters(cfg: Mapping[str, Any], dec: Decoder) -> int:
    """One MTP layer is a decoder layer (the last one's shape) plus its projection and norms."""
    if not dec.mtp_layers:
        return 0
    last = max((lin.layer for lin in dec.linears if lin.layer is not None), default=None)
    if last is None:
        return 0
    hidden = _need(text_config(cfg), "hidden_size")
    layer = sum(lin.parameters for lin in dec.linears if lin.layer == last)
    return dec.mtp_layers * (layer + 2 * hidden * hidden + 4 * hidden)


def parameter_counts(config: Mapping[str, Any]) -> ParameterCounts:
    """Parameter counts of a config.json: total, active per token, dense part, one expert."""
    dec = decoder(config)
    vision = vision_parameters(config)
    total = (
        dec.embedding_parameters
        + dec.other_parameters
        + sum(x.parameters for x in dec.linears)
        + vision
    )
    expert_params = _one_expert(dec, lambda lin: lin.parameters // lin.count)
    moe_layers = len(dec.moe_layer_indices)
    routed = moe_layers * dec.num_experts * expert_params
    lm_head = sum(x.parameters for x in dec.linears if x.kind == "lm_head")
    return ParameterCounts(
        total=total,
        active_per_token=total
        - vision
        - moe_layers * (dec.num_experts - dec.top_k) * expert_params,
        dense=total - routed,
        embedding=dec.embedding_parameters,
        lm_head=lm_head,
        expert=expert_params,
        num_experts=dec.num_experts,
        top_k=dec.top_k,
        num_shared_experts=dec.num_shared_experts,
        moe_layers=moe_layers,
        mtp=_mtp_parameters(config, dec),
        vision=vision,
    )


def _one_expert(dec: Decoder, size: Any) -> int:
    """Size of one routed expert in the first MoE layer (every MoE layer is alike)."""
    if not dec.moe_layer_indices:
        return 0
    first = dec.moe_layer_indices[0]
    return int(sum(size(x) for x in dec.linears if x.kind == "expert" and x.layer == first))


__all__ = [
    "Decoder",
    "Linear",
    "ParameterCounts",
    "WeightBytes",
    "decoder",
    "parameter_counts",
    "vision_parameters",
    "weight_bytes",
]
