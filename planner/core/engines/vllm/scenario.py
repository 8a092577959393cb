"""vLLM's reconciler, its shared part: one reading of the deployment (`Scenario`), the figures
it checks, and the other readings that could explain a difference."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from planner.core.capacity import KVGroup, Pool
from planner.core.engines.base import Scheduling
from planner.core.engines.vllm import Vllm
from planner.core.engines.vllm.groups import VllmPool, vllm_groups
from planner.core.errors import FieldError, Message
from planner.core.logs import Fact
from planner.core.model import ModelShape
from planner.core.parallel import Stages, pipeline_stage_layers
from planner.core.reconcile_common import Ctx, Figure, Range, Variant, gib_bounds, stage_layers
from planner.core.specs import LayerSpec, Stack, WindowPolicy, stack_of
from planner.core.units import KVDtype, kv_dtype

# (GiB text, fact, what it is) of the KV memory the engine sized its blocks from.
KvSource = tuple[str, Fact, str]


def as_vllm(ctx: Ctx) -> Vllm:
    """The engine of a vLLM log (this package's reconciler is only called for vLLM)."""
    assert isinstance(ctx.engine, Vllm)
    return ctx.engine


GPU_TOKENS = Figure("gpu_kv_cache_tokens", "GPU KV cache size", "tokens")
GPU_BLOCKS = Figure("num_gpu_blocks", "# GPU blocks", "blocks")
MAX_TOKENS = Figure("kv_max_tokens", "max tokens the KV cache can store", "tokens")
PADDING = Figure("padding_layers", "padding layers (KV-cache groups)", "layers")


@dataclass(frozen=True)
class Scenario:
    """One reading of the deployment: per-stage layers and the cache settings, those of the
    log's request as plan() resolves it (`Ctx.inputs`), or a variation of them."""

    ctx: Ctx
    stages: tuple[tuple[LayerSpec, ...], ...]  # per stage, one rank's layers in layer order
    dtype: KVDtype
    block: int
    policy: WindowPolicy
    sched: Scheduling
    length: int  # max_model_len, 0 when unknown

    @property
    def stacks(self) -> tuple[Stack, ...]:
        return tuple(stack_of(st) for st in self.stages)

    @property
    def whole(self) -> Stack:
        """All layers of the model (every stage), as vLLM groups them once."""
        return stack_of(spec for st in self.stages for spec in st)

    def groups(self, stack: Stack) -> tuple[tuple[KVGroup, ...], int]:
        return vllm_groups(
            stack, self.dtype, self.block, self.policy, as_vllm(self.ctx).group_ratio
        )

    def pool(self, budget_bytes: int) -> VllmPool:
        """vLLM's pool over the stages, as the engine builds it for plan(): groups of the whole
        model projected on each stage, every stage at the smallest block count."""
        pool = as_vllm(self.ctx).build_pool(
            Stages.from_ordered(self.stages),
            self.dtype,
            self.block,
            self.policy,
            budget_bytes,
            self.sched,
            self.length,
        )
        assert isinstance(pool, VllmPool)
        return pool

    @property
    def worst(self) -> Stack:
        """The stage whose block costs most: it has the fewest blocks, and vLLM takes the
        minimum over workers."""
        return self.pool(0).stack

    def block_bytes(self) -> int:
        """What one block id costs on the worst stage, the divisor of `pool`: one group, the
        sum of the stage's pages; hybrid, the page × the stage's largest projected group (every
        shown group is padded to that size)."""
        p = self.pool(0)
        if len(p.groups) == 1:
            return self.groups(p.stack)[1]
        size = p.groups[0].layers + p.groups[0].padding_layers
        return max(g.spec.page_bytes(self.dtype, self.block) for g in p.groups) * size

    def need(self) -> Callable[[int], int]:
        """The engine's start-up check: bytes one request of a length needs, at this release
        (`Vllm.startup_need`, what plan() asks)."""
        whole = replace(self, stages=(tuple(spec for st in self.stages for spec in st),))
        return as_vllm(self.ctx).startup_need(self.pool(0), self.stacks, lambda: whole.whole)

    def estimate(self, check_memory_bytes: int) -> int:
        """The engine's estimate of the longest max_model_len over the memory its check used
        (the "available KV cache memory" its error prints)."""
        return as_vllm(self.ctx).estimate_max_len(
            self.pool(0), self.need(), check_memory_bytes, self.stacks
        )

    def describe(self) -> str:
        p = self.pool(0)
        cost = self.block_bytes()
        if len(p.groups) == 1:
            layers = sum(c for _, c in p.stack)
            first = p.stack[0][0]
            page = first.page_bytes(self.dtype, self.block)
            return (
                f"page/layer = {self.block} tokens × {first.kv_heads} KV heads × "
                f"{first.head_size + first.head_size_v} × {self.dtype.bytes_per_element:g} B = "
                f"{page:,} B; × {layers} layers = {cost:,} B per block"
            )
        size = p.groups[0].layers + p.groups[0].padding_layers
        where = (
            f"groups of the whole model; on the stage with the largest, {size} layers"
            if len(self.stages) > 1
            else f"groups of {size} layers"
        )
        return f"{len(p.groups)} KV-cache {where} (page {cost // size:,} B) = {cost:,} B per block"


def stage_sizes(ctx: Ctx, pp: int) -> list[int]:
    assert ctx.shape is not None
    layers = ctx.shape.num_hidden_layers
    part = ctx.settings.partition
    if part is not None:
        if sum(part) != layers or len(part) != pp:
            raise FieldError(
                ("settings", "pipeline_layer_partition"),
                "vllm.pp_layer_partition",
                pp=pp,
                layers=layers,
                part=part,
            )
        return list(part)
    return [len(x) for x in pipeline_stage_layers(layers, pp)]


@dataclass(frozen=True)
class _Base:
    """The settings a reading starts from."""

    shape: ModelShape
    tp: int
    dtype: KVDtype
    block: int
    policy: WindowPolicy | None  # None: the rule's, over the reading's layers
    sched: Scheduling
    length: int


def _base(ctx: Ctx) -> _Base:
    """The log's request as plan() resolved it; when the release's rules refuse that request
    (or it lacks a length plan() needs), the reader's own settings, so that the log's figures
    are still recomputed. Start-up figures take no speculative reservation (admission only)."""
    assert ctx.shape is not None and ctx.dtype is not None
    s = ctx.settings
    inp = ctx.inputs
    if inp is not None:
        v0 = s.vllm_gen != "v1"
        return _Base(
            inp.shape,
            inp.tp,
            inp.kv_dtype,
            inp.block_size,
            "full_length" if v0 else inp.policy,
            replace(inp.sched, reserved_tokens=0),
            inp.context_tokens,
        )
    sched = Scheduling(s.max_num_batched_tokens, None, s.mnbt, 1)
    return _Base(ctx.shape, s.tp, ctx.dtype, s.block, None, sched, s.max_model_len or 0)


def scenario(
    ctx: Ctx,
    *,
    dtype: KVDtype | None = None,
    tp: int | None = None,
    draft: int | None = None,
    hybrid: bool | None = None,
    block: int | None = None,
    whole_model: bool = False,
) -> Scenario:
    """The base reading (`_base`), or one with a setting changed: the KV dtype, TP, draft
    layers the log may count (`draft_layers`, no PlanRequest field), the hybrid manager, the
    block size, or every layer on one stage."""
    s = ctx.settings
    b = _base(ctx)
    tp = tp or b.tp
    if tp != b.tp:
        ctx.engine.validate_parallel(b.shape, tp, 1)
    sizes = [b.shape.num_hidden_layers] if whole_model else stage_sizes(ctx, s.pp)
    stages = stage_layers(b.shape, ctx.engine, tp, sizes, s.draft if draft is None else draft)
    policy = b.policy
    if policy is None or hybrid is not None or (s.draft if draft is None else draft):
        policy = _policy(ctx, s.hybrid if hybrid is None else hybrid, stages)
    return Scenario(
        ctx, tuple(stages), dtype or b.dtype, block or b.block, policy, b.sched, b.length
    )


def _policy(ctx: Ctx, hybrid: bool, stages: Sequence[Sequence[LayerSpec]]) -> WindowPolicy:
    """v1: plan()'s rule (EngineRules.sliding_policy): disabling the hybrid manager makes
    windows full length only when full-attention layers are present too, draft layers included
    (they are in vLLM's spec dict). v0 keeps every layer full length."""
    assert ctx.shape is not None
    if ctx.settings.vllm_gen != "v1":
        return "full_length"
    # The rule reads the layers' kinds; the shape is otherwise the model's.
    layers = tuple(spec for st in stages for spec in st)
    return ctx.engine.window_policy(
        replace(ctx.shape, layers=layers), hybrid_manager=hybrid, explicit_windows=False
    )


def readings(ctx: Ctx, figure: Callable[[Scenario], Range | None]) -> list[Variant]:
    """Other readings of the deployment that could explain a difference, most likely first."""
    assert ctx.shape is not None and ctx.dtype is not None
    s = ctx.settings
    base = scenario(ctx)
    out: list[Variant] = []

    def add(reason: Message, **kw: object) -> None:
        out.append(Variant(reason, lambda: figure(scenario(ctx, **kw))))  # type: ignore[arg-type]

    if s.pp > 1:
        add(
            Message.of("reason.pp_whole_model_charged", layers=ctx.shape.num_hidden_layers),
            whole_model=True,
        )
    if ctx.dtype.bits >= 16:
        add(Message.of("reason.matches_fp8_kv"), dtype=kv_dtype("fp8"))
    else:
        add(
            Message.of("reason.matches_model_dtype_kv", dtype=ctx.shape.dtype),
            dtype=kv_dtype(ctx.shape.dtype if ctx.shape.dtype != "fp32" else "bf16"),
        )
    if s.draft == 0 and not ctx.shape.draft_layers:
        for k in (1, 2, 3):
            add(
                Message.of(
                    "reason.matches_draft_layer" if k == 1 else "reason.matches_draft_layers", k=k
                ),
                draft=k,
            )
    for t in (1, 2, 4, 8, 16):
        if t != s.tp:
            add(Message.of("reason.matches_tp", t=t), tp=t)
    if s.hybrid and base.policy != scenario(ctx, hybrid=False).policy:
        add(
            Message.of("reason.matches_hybrid_manager_off"),
            hybrid=False,
        )
    if ctx.shape.is_mla and s.block not in (64, 128):
        for b in (64, 128):
            add(Message.of("reason.matches_mla_block_size", b=b), block=b)
    return out


def by_budget(
    ctx: Ctx, text: str, value: Callable[[Pool], float]
) -> tuple[float, Range, tuple[int, int], Pool]:
    """A figure at the logged budget and over the budgets its display rounding admits."""
    lo, mid, hi = gib_bounds(text)
    base = scenario(ctx)
    p_lo, p_mid, p_hi = base.pool(lo), base.pool(mid), base.pool(hi)
    return (
        value(p_mid),
        (value(p_lo), value(p_hi)),
        (p_lo.num_blocks, p_hi.num_blocks),
        p_mid,
    )


def budget_window(text: str, value: Callable[[Pool], float]) -> Callable[[Scenario], Range]:
    lo, _, hi = gib_bounds(text)
    return lambda sc: (value(sc.pool(lo)), value(sc.pool(hi)))


__all__ = [
    "GPU_BLOCKS",
    "GPU_TOKENS",
    "MAX_TOKENS",
    "PADDING",
    "KvSource",
    "Scenario",
    "as_vllm",
    "budget_window",
    "by_budget",
    "readings",
    "scenario",
    "stage_sizes",
]
