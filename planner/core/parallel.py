"""Per-rank shapes under tensor and pipeline parallelism.

Seed 000 ("每卡 KV 不是总量除以卡数就结束"): a rank holds whole KV heads. When TP exceeds the KV
head count the heads are replicated (`max(1, Hkv // tp)` per rank), so physical bytes summed over
ranks exceed the logical total. MLA latents are replicated on every rank.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from planner.core.engines import EngineRules
from planner.core.model import LayerSpec, ModelShape, Stack

ExtraLayers = Literal["before_last", "last", "first"]

# Where each engine puts the L % pp layers left over: vLLM one each to the stages just before
# the last (get_pp_indices; the last stage also holds the LM head), SGLang to the last ones (its
# own get_pp_indices), TensorRT-LLM to the first ones (Mapping.pp_layers, torch.tensor_split).
_EXTRA_LAYERS: dict[str, ExtraLayers] = {"sglang": "last", "trtllm": "first"}


def pipeline_stage_layers(
    num_layers: int, pp: int, extra: ExtraLayers = "before_last"
) -> list[list[int]]:
    """Layer indices per stage: L // pp each, the remainder one each where `extra` says
    (default: vLLM's `get_pp_indices`)."""
    sizes = [num_layers // pp] * pp
    rest = num_layers % pp
    where = {
        "before_last": range(pp - 1 - rest, pp - 1),
        "last": range(pp - rest, pp),
        "first": range(rest),
    }[extra]
    for i in where:
        sizes[i] += 1
    out: list[list[int]] = []
    start = 0
    for size in sizes:
        out.append(list(range(start, start + size)))
        start += size
    return out


@dataclass(frozen=True, slots=True)
class RankLayout:
    """What one rank of one pipeline stage stores."""

    stage: int
    layers: int
    stack: Stack  # per-rank specs (KV heads already divided) as (spec, layer count) pairs
    kv_heads: int  # KV heads per rank for the model's main layers
    replication: int  # how many ranks hold each KV head

    @property
    def first(self) -> LayerSpec:
        return self.stack[0][0]


def rank_layouts(shape: ModelShape, rules: EngineRules, tp: int, pp: int) -> list[RankLayout]:
    """One layout per pipeline stage (all TP ranks of a stage store the same amount)."""
    kv_heads_rank = rules.kv_heads_per_rank(shape.num_key_value_heads, tp, mla=shape.is_mla)
    if shape.is_mla:
        replication = tp
    else:
        # Total head slots across ranks over distinct heads, e.g. TP16 over 8 heads -> 2.
        replication = max(1, (kv_heads_rank * tp) // shape.num_key_value_heads)
    # Divide heads once per distinct spec, not once per layer.
    per_rank = {
        g.spec: replace(
            g.spec, kv_heads=rules.kv_heads_per_rank(g.spec.kv_heads, tp, mla=shape.is_mla)
        )
        for g in shape.groups
    }
    if pp == 1:
        stack = tuple((per_rank[g.spec], g.layers) for g in shape.groups)
        return [RankLayout(0, shape.num_hidden_layers, stack, kv_heads_rank, replication)]
    out: list[RankLayout] = []
    split = pipeline_stage_layers(
        shape.num_hidden_layers, pp, _EXTRA_LAYERS.get(rules.name, "before_last")
    )
    for stage, indices in enumerate(split):
        members = set(indices)
        stage_stack = tuple(
            (per_rank[g.spec], n)
            for g in shape.groups
            if (n := sum(1 for i in g.layer_indices if i in members))
        )
        out.append(RankLayout(stage, len(indices), stage_stack, kv_heads_rank, replication))
    return out


def stage_layer_specs(
    shape: ModelShape, rules: EngineRules, tp: int, pp: int
) -> list[tuple[LayerSpec, ...]]:
    """Each pipeline stage's layers in layer order, as one of its TP ranks stores them.

    vLLM groups layers by index across the whole model (strided splits), so capacity needs the
    order, not just the (spec, count) stack."""
    per_rank = {
        g.spec: replace(
            g.spec, kv_heads=rules.kv_heads_per_rank(g.spec.kv_heads, tp, mla=shape.is_mla)
        )
        for g in shape.groups
    }
    return [
        tuple(per_rank[shape.layers[i]] for i in indices)
        for indices in pipeline_stage_layers(
            shape.num_hidden_layers, pp, _EXTRA_LAYERS.get(rules.name, "before_last")
        )
    ]
