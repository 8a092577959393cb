"""Per-rank shapes under tensor and pipeline parallelism.

Seed 000 ("每卡 KV 不是总量除以卡数就结束"): a rank holds whole KV heads. When TP exceeds the KV
head count the heads are replicated (`max(1, Hkv // tp)` per rank), so physical bytes summed over
ranks exceed the logical total. MLA latents are replicated on every rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from planner.core.memo import IdentityMemo, memo_by_identity
from planner.core.model import ModelShape
from planner.core.specs import LayerSpec, Stack, cache_layers, stack_of

# Where the L % pp leftover layers go: vLLM one each to the stages just before the last, SGLang
# to the last ones, TensorRT-LLM to the first ones.
ExtraLayers = Literal["before_last", "last", "first"]


class Engine(Protocol):
    """How an engine shards layers (`planner.core.engines.base.Engine` is one)."""

    @property
    def pp_extra_layers(self) -> ExtraLayers: ...

    def kv_heads_per_rank(self, kv_heads: int, tp: int) -> int: ...

    def rank_spec(self, spec: LayerSpec, tp: int) -> LayerSpec: ...


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


@memo_by_identity(1024)
def rank_layouts(shape: ModelShape, engine: Engine, tp: int, pp: int) -> tuple[RankLayout, ...]:
    """One layout per pipeline stage (all TP ranks of a stage store the same amount); kept per
    shape, engine and sizes (planner.core.memo)."""
    kv_heads_rank = engine.kv_heads_per_rank(shape.num_key_value_heads, tp)
    if shape.is_mla:
        kv_heads_rank, replication = 1, tp
    else:
        # Total head slots across ranks over distinct heads, e.g. TP16 over 8 heads -> 2.
        replication = max(1, (kv_heads_rank * tp) // shape.num_key_value_heads)
    # Divide heads once per distinct spec, not once per layer.
    per_rank = {g.spec: engine.rank_spec(g.spec, tp) for g in shape.groups}
    if pp == 1:
        stack = tuple((per_rank[g.spec], g.layers) for g in shape.groups)
        return (RankLayout(0, shape.num_hidden_layers, stack, kv_heads_rank, replication),)
    out: list[RankLayout] = []
    for stage, indices in enumerate(_stage_indices(shape, engine, pp)):
        members = set(indices)
        stage_stack = tuple(
            (per_rank[g.spec], n)
            for g in shape.groups
            if (n := sum(1 for i in g.layer_indices if i in members))
        )
        target = sum(1 for i in indices if i < shape.num_hidden_layers)
        out.append(RankLayout(stage, target, stage_stack, kv_heads_rank, replication))
    return tuple(out)


def _stage_indices(
    shape: ModelShape, engine: Engine, pp: int, sizes: Sequence[int] | None = None
) -> list[list[int]]:
    """Layer indices per stage (the engine's split, or consecutive `sizes`: vLLM's
    VLLM_PP_LAYER_PARTITION); a draft's layers (numbered after the target's) run on the last
    stage, as vLLM's speculator does."""
    if sizes is None:
        stages = pipeline_stage_layers(shape.num_hidden_layers, pp, engine.pp_extra_layers)
    else:
        ends = [sum(sizes[: i + 1]) for i in range(len(sizes))]
        stages = [list(range(end - n, end)) for n, end in zip(sizes, ends, strict=True)]
    start = shape.num_hidden_layers
    stages[-1].extend(range(start, start + len(shape.draft_layers)))
    return stages


def stage_layer_specs(
    shape: ModelShape, engine: Engine, tp: int, pp: int, sizes: Sequence[int] | None = None
) -> list[tuple[LayerSpec, ...]]:
    """Each pipeline stage's layers in layer order, as one of its TP ranks stores them.

    vLLM groups layers by index across the whole model (strided splits), so capacity needs the
    order, not just the (spec, count) stack."""
    per_rank = {g.spec: engine.rank_spec(g.spec, tp) for g in shape.groups}
    every = (*shape.layers, *shape.draft_layers)
    return [
        tuple(per_rank[c] for c in cache_layers(every[i] for i in indices))
        for indices in _stage_indices(shape, engine, pp, sizes)
    ]


class Stages:
    """Each pipeline stage's layers as one of its TP ranks stores them: as (spec, count) stacks
    (what most engines size) and, computed only when asked, in layer order (vLLM groups layers
    by index across the whole model, so it needs the order when there are several stages)."""

    __slots__ = ("_ordered", "_source", "stacks")

    def __init__(
        self,
        stacks: tuple[Stack, ...],
        ordered: list[tuple[LayerSpec, ...]] | None = None,
        source: tuple[ModelShape, Engine, int, int] | None = None,
    ) -> None:
        self.stacks = stacks
        self._ordered = ordered
        self._source = source

    @classmethod
    def of(cls, shape: ModelShape, engine: Engine, tp: int, pp: int) -> Stages:
        """Kept per shape, engine and sizes (a plan asks several times; planner.core.memo)."""
        hit = _STAGES.get((shape,), (cls, engine, tp, pp))
        if hit is None:
            hit = _STAGES.put((shape,), (cls, engine, tp, pp), cls._of(shape, engine, tp, pp))
        return hit

    @classmethod
    def _of(cls, shape: ModelShape, engine: Engine, tp: int, pp: int) -> Stages:
        if pp == 1:
            per_rank = tuple((engine.rank_spec(g.spec, tp), g.layers) for g in shape.groups)
            return cls((per_rank,), None, (shape, engine, tp, pp))
        ordered = stage_layer_specs(shape, engine, tp, pp)
        return cls(tuple(stack_of(st) for st in ordered), ordered)

    @classmethod
    def from_ordered(cls, ordered: Sequence[Sequence[LayerSpec]]) -> Stages:
        layers = [tuple(st) for st in ordered]
        return cls(tuple(stack_of(st) for st in layers), layers)

    def ordered(self) -> list[tuple[LayerSpec, ...]]:
        if self._ordered is None:
            assert self._source is not None
            self._ordered = stage_layer_specs(*self._source)
        return self._ordered

    def __len__(self) -> int:
        return len(self.stacks)


_STAGES: IdentityMemo[Stages] = IdentityMemo(1024)
