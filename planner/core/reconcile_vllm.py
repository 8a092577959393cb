"""vLLM: recompute every logged KV figure from the logged available memory (engine_rules.md §1.3).

v1: `Available KV cache memory: A GiB` → num_blocks = A // (page × group_size) per worker, the
minimum over workers (so over pipeline stages); `GPU KV cache size` = num_blocks // groups × bs;
`Maximum concurrency` = num_blocks / Σ groups' blocks per request (no null block); the start-up
check's "KV cache is needed" and "estimated maximum model length"; padding-layer warnings.
v0: `kv_cache_size` → `# GPU blocks` = kv // (bs × layers × per-layer token bytes), every layer
full length; concurrency = blocks × bs / max_model_len.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from planner.core.capacity import KVGroup, Pool
from planner.core.engines.vllm import Vllm
from planner.core.engines.vllm.groups import VllmPool, vllm_groups, vllm_pipeline_pool
from planner.core.errors import FieldError, PlanError
from planner.core.logparse import Fact, to_float, to_int
from planner.core.parallel import pipeline_stage_layers
from planner.core.reconcile_common import (
    Ctx,
    Figure,
    Range,
    Variant,
    const,
    display_equal,
    gib,
    gib_bounds,
    judge,
    judge_printed,
    set_reserves,
    stage_layers,
    unique_facts,
)
from planner.core.specs import LayerSpec, Stack, WindowPolicy, stack_of
from planner.core.units import GiB, KVDtype, kv_dtype

MAX_LEN_SEARCH = 1 << 24


def _vllm(ctx: Ctx) -> Vllm:
    """The engine of a vLLM log (this module is only called for vLLM)."""
    assert isinstance(ctx.engine, Vllm)
    return ctx.engine


GPU_TOKENS = Figure("gpu_kv_cache_tokens", "GPU KV cache size", "tokens")
GPU_BLOCKS = Figure("num_gpu_blocks", "# GPU blocks", "blocks")
MAX_TOKENS = Figure("kv_max_tokens", "max tokens the KV cache can store", "tokens")
PADDING = Figure("padding_layers", "padding layers (KV-cache groups)", "layers")


@dataclass(frozen=True)
class Scenario:
    """One reading of the deployment: per-stage layers and the cache settings."""

    ctx: Ctx
    stages: tuple[tuple[LayerSpec, ...], ...]  # per stage, one rank's layers in layer order
    dtype: KVDtype
    block: int
    policy: WindowPolicy

    @property
    def stacks(self) -> tuple[Stack, ...]:
        return tuple(stack_of(st) for st in self.stages)

    @property
    def whole(self) -> Stack:
        """All layers of the model (every stage), as vLLM groups them once."""
        return stack_of(spec for st in self.stages for spec in st)

    def groups(self, stack: Stack) -> tuple[tuple[KVGroup, ...], int]:
        return vllm_groups(stack, self.dtype, self.block, self.policy, _vllm(self.ctx).group_ratio)

    def pool(self, budget_bytes: int) -> VllmPool:
        """vLLM's pool over the stages, built as plan() builds it: groups of the whole model
        projected on each stage, every stage at the smallest block count."""
        return vllm_pipeline_pool(
            self.stages,
            self.dtype,
            self.block,
            self.policy,
            budget_bytes,
            self.ctx.settings.mnbt,
            tokens_from_concurrency=_vllm(self.ctx).tokens_from_concurrency,
            group_ratio=_vllm(self.ctx).group_ratio,
        )

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

    def needed_bytes(self, stack: Stack, max_len: int) -> int:
        """vLLM's start-up check: Σ layers max_memory_usage_bytes(max_len) (no padding)."""
        groups, _ = self.groups(stack)
        return sum(
            g.layers
            * g.spec.page_bytes(self.dtype, g.block_size)
            * g.blocks_needed(max_len, self.ctx.settings.mnbt)
            for g in groups
        )

    def longest(self, stack: Stack, budget_bytes: int) -> int:
        """Largest max_model_len the check admits (vLLM's estimate, a binary search)."""
        if self.needed_bytes(stack, 1) > budget_bytes:
            return 0
        lo, hi = 1, MAX_LEN_SEARCH
        while lo + 1 < hi:
            mid = (lo + hi) // 2
            if self.needed_bytes(stack, mid) <= budget_bytes:
                lo = mid
            else:
                hi = mid
        return lo

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
                f"must list {pp} stage sizes summing to {layers} layers (got {part})",
            )
        return list(part)
    return [len(x) for x in pipeline_stage_layers(layers, pp)]


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
    assert ctx.shape is not None and ctx.dtype is not None
    s = ctx.settings
    tp = tp or s.tp
    if tp != s.tp:
        ctx.engine.validate_parallel(ctx.shape, tp, 1)
    sizes = [ctx.shape.num_hidden_layers] if whole_model else stage_sizes(ctx, s.pp)
    stages = stage_layers(ctx.shape, ctx.engine, tp, sizes, s.draft if draft is None else draft)
    on = s.hybrid if hybrid is None else hybrid
    policy = _policy(ctx, on, stages)
    return Scenario(ctx, tuple(stages), dtype or ctx.dtype, block or s.block, policy)


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


# ---------------------------------------------------------------------------------------------


def _variants(ctx: Ctx, figure: Callable[[Scenario], Range | None]) -> list[Variant]:
    """Other readings of the deployment that could explain a difference, most likely first."""
    assert ctx.shape is not None and ctx.dtype is not None
    s = ctx.settings
    base = scenario(ctx)
    out: list[Variant] = []

    def add(reason: str, **kw: object) -> None:
        out.append(Variant(reason, lambda: figure(scenario(ctx, **kw))))  # type: ignore[arg-type]

    if s.pp > 1:
        add(
            f"the log charges all {ctx.shape.num_hidden_layers} layers of every pipeline stage "
            "against one stage's memory (a version-dependent start-up check, vllm#34076); "
            "per stage the figure is as predicted",
            whole_model=True,
        )
    if ctx.dtype.bits >= 16:
        add("matches an fp8 KV cache: set kv_cache_dtype to fp8", dtype=kv_dtype("fp8"))
    else:
        add(
            f"matches a {ctx.shape.dtype} KV cache: set kv_cache_dtype to auto",
            dtype=kv_dtype(ctx.shape.dtype if ctx.shape.dtype != "fp32" else "bf16"),
        )
    if s.draft == 0:
        for k in (1, 2, 3):
            add(
                f"matches with {k} speculative draft layer{'s' if k > 1 else ''} (EAGLE/MTP) "
                f"in the KV cache: set draft_layers {k}",
                draft=k,
            )
    for t in (1, 2, 4, 8, 16):
        if t != s.tp:
            add(f"matches tensor_parallel_size {t} (KV heads per rank differ)", tp=t)
    if s.hybrid and base.policy != scenario(ctx, hybrid=False).policy:
        add(
            "matches with the hybrid KV cache manager disabled (every layer full length)",
            hybrid=False,
        )
    if ctx.shape.is_mla and s.block not in (64, 128):
        for b in (64, 128):
            add(f"matches block_size {b} (vLLM's MLA backends force it on CUDA)", block=b)
    return out


def _by_budget(
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


def _window(text: str, value: Callable[[Pool], float]) -> Callable[[Scenario], Range]:
    lo, _, hi = gib_bounds(text)
    return lambda sc: (value(sc.pool(lo)), value(sc.pool(hi)))


def _kv_source(ctx: Ctx) -> tuple[str, Fact, str] | None:
    """(GiB text, fact, what it is) of the KV memory the engine sized its blocks from."""
    avail = ctx.of("available_kv")
    if avail:
        low = min(avail, key=lambda f: to_float(f.values["gib"]))
        values = {f.values["gib"] for f in avail}
        if len(values) > 1:
            ctx.notes.append(
                f"{len(avail)} workers printed their available KV memory "
                f"({', '.join(sorted(values))} GiB); vLLM gives every worker the smallest "
                "one's block count, so "
                f"{low.values['gib']} GiB is used."
            )
        return low.values["gib"], low, "Available KV cache memory"
    for kind, key in (("v0_profile", "kv_cache_size"), ("v0_breakdown", "kv_gib")):
        f = ctx.first(kind)
        if f is not None and key in f.values:
            return f.values[key], f, "memory reserved for the KV cache"
    return None


def _min_workers_hint(ctx: Ctx) -> str | None:
    workers = ctx.settings.tp * ctx.settings.pp
    seen = len(ctx.of("available_kv"))
    if workers > 1 and seen < workers:
        return (
            f"likely: vLLM sets num_blocks to the minimum over its {workers} workers, and the "
            f"log shows {seen} worker's available memory; another worker had less (a KV "
            "connector or another process on that GPU would do it)"
        )
    return None


def _tokens_at(max_model_len: int) -> Callable[[Pool], float]:
    """The logged "GPU KV cache size" of a pool, for a max_model_len."""
    return lambda p: p.reported_tokens(max_model_len)


def _tokens_checks(ctx: Ctx, src: tuple[str, Fact, str] | None) -> None:
    for f in unique_facts(ctx.of("kv_tokens"), "tokens"):
        logged = to_int(f.values["tokens"])
        if src is None:
            reason = "the log has no 'Available KV cache memory' line to recompute it from"
            judge(ctx, GPU_TOKENS, f, logged, reason=reason)
            continue
        text = src[0]
        max_len = ctx.settings.max_model_len
        if _vllm(ctx).tokens_from_concurrency and max_len is None:
            reason = "'GPU KV cache size' is max concurrency × max_model_len; give max_model_len"
            judge(ctx, GPU_TOKENS, f, logged, reason=reason)
            continue
        length = max_len or 1
        pred, window, blocks, pool = _by_budget(ctx, text, _tokens_at(length))
        groups = len(pool.groups)
        bs = min(g.block_size for g in pool.groups)
        head = (
            f"{scenario(ctx).describe()}; floor({text} GiB / that) = {pool.num_blocks:,} blocks; "
        )
        if _vllm(ctx).tokens_from_concurrency:
            need = pool.blocks_per_request(length)
            arithmetic = head + (
                f"int({pool.num_blocks:,} / {need:,} blocks per request × max_model_len "
                f"{length:,}) = {int(pred):,} tokens (vLLM {ctx.engine.version_text})"
            )
        else:
            arithmetic = head + (
                f"{pool.num_blocks:,} // {groups} group{'s' if groups > 1 else ''} × {bs} = "
                f"{int(pred):,} tokens (vLLM {ctx.engine.version_text})"
            )
        if groups > 1 and not _vllm(ctx).tokens_from_concurrency:
            ctx.notes.append(
                f"'GPU KV cache size' divides num_blocks by the {groups} KV-cache groups of this "
                "hybrid model: it is not the tokens one request can hold."
            )
        judge(
            ctx,
            GPU_TOKENS,
            f,
            logged,
            predicted=pred,
            admitted=window,
            blocks_range=blocks,
            arithmetic=arithmetic,
            variants=_variants(ctx, _window(text, _tokens_at(length))),
            likely=_min_workers_hint(ctx) if logged < pred else None,
        )


def _concurrency(pool_blocks: int, need: int, v0: bool, bs: int, ctx_tokens: int) -> float:
    if v0:
        return round(pool_blocks * bs / ctx_tokens, 2)
    return round(pool_blocks / need, 2)


def _concurrency_checks(ctx: Ctx, src: tuple[str, Fact, str] | None) -> None:
    v0 = ctx.settings.vllm_gen == "v0"
    seen: set[tuple[str, str]] = set()
    for f in ctx.of("max_concurrency"):
        key = (f.values["context_tokens"], f.values["x"])
        if key in seen:
            continue
        seen.add(key)
        c = to_int(f.values["context_tokens"])
        x = f.values["x"]
        base = scenario(ctx)
        pool = base.pool(GiB)
        need = pool.blocks_per_request(c)
        bs = ctx.settings.block
        per_group = " + ".join(f"{g.blocks_needed(c, ctx.settings.mnbt):,}" for g in pool.groups)
        if len(pool.groups) > 1:
            per_group += f" = {need:,}"
        how = (
            f"blocks × {bs} / {c:,} tokens (vLLM v0)"
            if v0
            else f"blocks / {per_group} blocks per request of {c:,} tokens"
        )
        blocks_fact = ctx.first("num_blocks")
        tokens_fact = ctx.first("kv_tokens")
        about = Figure("max_concurrency", f"Maximum concurrency for {c:,} tokens", "x")
        if src is not None:
            text = src[0]

            def conc(p: Pool, need: int = need, bs: int = bs, c: int = c) -> float:
                return _concurrency(p.num_blocks, need, v0, bs, c)

            pred, window, blocks, mid = _by_budget(ctx, text, conc)
            resident = max(0, (mid.num_blocks - 1) // need) if not v0 else None
            arithmetic = f"{mid.num_blocks:,} {how} = {pred:.2f}x"
            if resident is not None:
                arithmetic += (
                    f"; it ignores the null block: {resident} requests of {c:,} tokens can hold "
                    "all their blocks at once (kvplan's max_requests)"
                )
            judge_printed(
                ctx,
                about,
                f,
                x,
                pred,
                admitted=window,
                blocks_range=blocks,
                arithmetic=arithmetic,
                variants=_variants(ctx, _window(text, conc)),
            )
        elif blocks_fact is not None:
            b = to_int(blocks_fact.values["gpu_blocks"])
            pred = _concurrency(b, need, v0, bs, c)
            judge_printed(ctx, about, f, x, pred, arithmetic=f"logged {b:,} {how} = {pred:.2f}x")
        elif tokens_fact is not None:
            t = to_int(tokens_fact.values["tokens"])
            g = len(pool.groups)
            lo_b, hi_b = t // bs * g, t // bs * g + g - 1
            pred = _concurrency(lo_b, need, v0, bs, c)
            window = (pred, _concurrency(hi_b, need, v0, bs, c))
            judge_printed(
                ctx,
                about,
                f,
                x,
                pred,
                admitted=window,
                arithmetic=f"from the logged {t:,} tokens = {lo_b:,} blocks: {lo_b:,} {how}",
            )
        else:
            reason = (
                "the log has neither the available KV memory nor a block or token count to divide"
            )
            judge(ctx, about, f, to_float(x), reason=reason)


def _blocks_checks(ctx: Ctx, src: tuple[str, Fact, str] | None) -> None:
    for f in unique_facts(ctx.of("num_blocks"), "gpu_blocks"):
        logged = to_int(f.values["gpu_blocks"])
        base = scenario(ctx)
        cost = base.block_bytes()
        if src is None:
            judge(
                ctx,
                GPU_BLOCKS,
                f,
                logged,
                reason=f"this log prints no available KV memory (only the block count); "
                f"implied KV memory: {logged:,} blocks × {cost:,} B = {gib(logged * cost)} "
                "per worker",
            )
        else:
            text = src[0]
            pred, window, blocks, _ = _by_budget(ctx, text, lambda p: p.num_blocks)
            judge(
                ctx,
                GPU_BLOCKS,
                f,
                logged,
                predicted=pred,
                admitted=window,
                blocks_range=blocks,
                arithmetic=f"{base.describe()}; floor({text} GiB / {cost:,} B) = {int(pred):,}",
                variants=_variants(ctx, _window(text, lambda p: p.num_blocks)),
            )
        if "cpu_blocks" in f.values:
            cpu = to_int(f.values["cpu_blocks"])
            swap = ctx.settings.swap_bytes
            judge(
                ctx,
                Figure("num_cpu_blocks", "# CPU blocks", "blocks"),
                f,
                cpu,
                predicted=swap // cost,
                arithmetic=f"swap space {gib(swap)} // {cost:,} B = {swap // cost:,}",
            )


def _v0_profile_checks(ctx: Ctx) -> None:
    f = ctx.first("v0_profile")
    if f is not None and {"total_gpu_memory", "gpu_memory_utilization", "peak_torch_memory"} <= set(
        f.values
    ):
        v = f.values
        keys = (
            "total_gpu_memory",
            "gpu_memory_utilization",
            "peak_torch_memory",
            "non_torch_memory",
        )
        nums = {k: to_float(v.get(k, "0")) for k in keys}
        pred = (
            nums["total_gpu_memory"] * nums["gpu_memory_utilization"]
            - nums["peak_torch_memory"]
            - nums["non_torch_memory"]
        )
        slack = 0.005 * (1 + nums["gpu_memory_utilization"]) + 0.01
        judge_printed(
            ctx,
            Figure("kv_cache_size_gib", "kv_cache_size (memory profiling)", "GiB"),
            f,
            v["kv_cache_size"],
            pred,
            admitted=(pred - slack, pred + slack),
            arithmetic=f"{v['total_gpu_memory']} × {v['gpu_memory_utilization']} − peak torch "
            f"{v['peak_torch_memory']} − non-torch {v.get('non_torch_memory', '0')} = "
            f"{pred:.3f} GiB",
        )
    b = ctx.first("v0_breakdown")
    inst = ctx.first("v0_instance_memory")
    if b is not None and inst is not None and {"weights_gib", "activation_gib"} <= set(b.values):
        parts = [
            to_float(b.values[k])
            for k in ("weights_gib", "non_torch_gib", "activation_gib")
            if k in b.values
        ]
        pred = to_float(inst.values["requested_gib"]) - sum(parts)
        slack = 0.005 * (len(parts) + 1)
        judge_printed(
            ctx,
            Figure("kv_cache_size_gib", "memory reserved for KV cache", "GiB"),
            b,
            b.values["kv_gib"],
            pred,
            admitted=(pred - slack, pred + slack),
            arithmetic=f"{inst.values['requested_gib']} GiB − weights − non-torch − "
            f"activation peak = {pred:.3f} GiB",
        )


def _v0_error_checks(ctx: Ctx, src: tuple[str, Fact, str] | None) -> None:
    for f in unique_facts(ctx.of("v0_error"), "max_tokens"):
        logged = to_int(f.values["max_tokens"])
        bs = ctx.settings.block
        base = scenario(ctx)
        cost = base.block_bytes()
        blocks_fact = ctx.first("num_blocks")
        if blocks_fact is not None:
            b = to_int(blocks_fact.values["gpu_blocks"])
            judge(
                ctx,
                MAX_TOKENS,
                f,
                logged,
                predicted=b * bs,
                arithmetic=f"logged {b:,} GPU blocks × {bs} tokens = {b * bs:,}",
            )
        elif src is not None:
            pred, window, span, _ = _by_budget(
                ctx,
                src[0],
                lambda p, bs=bs: p.num_blocks * bs,  # type: ignore[misc]
            )
            judge(
                ctx,
                MAX_TOKENS,
                f,
                logged,
                predicted=pred,
                admitted=window,
                blocks_range=span,
                arithmetic=f"floor({src[0]} GiB / {cost:,} B) × {bs}",
            )
        else:
            implied = logged // bs
            judge(
                ctx,
                MAX_TOKENS,
                f,
                logged,
                reason=f"the log prints no KV memory or block count to recompute it from; "
                f"implied: {logged:,} tokens = {implied:,} blocks × {cost:,} B = "
                f"{gib(implied * cost)} of KV per worker (vLLM v0 takes the minimum over "
                "workers)",
            )


def _v1_error_checks(ctx: Ctx) -> None:
    for f in ctx.of("v1_error"):
        v = f.values
        if "max_model_len" not in v:
            continue
        length = to_int(v["max_model_len"])
        base = scenario(ctx)
        needed = max(base.needed_bytes(st, length) for st in base.stacks)
        whole = scenario(ctx, whole_model=True) if ctx.settings.pp > 1 else None
        variants: list[Variant] = []
        if whole is not None:
            w = whole.needed_bytes(whole.stacks[0], length)
            span_w: Range = (w / GiB - 0.005, w / GiB + 0.005)
            variants.append(
                Variant(
                    "the start-up check charges all "
                    f"{ctx.shape.num_hidden_layers if ctx.shape else 0} layers (every pipeline "
                    f"stage) against one stage's memory: {gib(w)} "
                    "(version-dependent, vllm#34076)",
                    const(span_w),
                )
            )
        judge_printed(
            ctx,
            Figure("kv_needed_gib", f"KV cache needed for {length:,} tokens", "GiB"),
            f,
            v["needed_gib"],
            needed / GiB,
            arithmetic=f"cdiv({length:,}, {ctx.settings.block}) blocks × per-block bytes of "
            f"the largest stage = {needed:,} B = {needed / GiB:.3f} GiB",
            variants=variants,
        )
        if "estimated_max_model_len" in v and "available_gib" in v:
            lo, mid, hi = gib_bounds(v["available_gib"])
            stack = base.worst
            pred = base.longest(stack, mid)
            window = (base.longest(stack, lo), base.longest(stack, hi))
            est_variants: list[Variant] = []
            if whole is not None:
                wst = whole.stacks[0]
                est_variants.append(
                    Variant(
                        "estimated with all layers of every pipeline stage, as this version's "
                        "check charges them (vllm#34076)",
                        const((whole.longest(wst, lo), whole.longest(wst, hi))),
                    )
                )

            def longest(sc: Scenario, lo: int = lo, hi: int = hi) -> Range:
                return (sc.longest(sc.worst, lo), sc.longest(sc.worst, hi))

            judge(
                ctx,
                Figure("estimated_max_model_len", "estimated maximum model length", "tokens"),
                f,
                to_int(v["estimated_max_model_len"]),
                predicted=pred,
                admitted=window,
                arithmetic=f"largest length whose KV fits "
                f"{v['available_gib']} GiB: {pred:,} tokens",
                variants=est_variants + _variants(ctx, longest),
            )


def _padding(sc: Scenario, stack: Stack, old_rule: bool) -> list[tuple[int, float]]:
    """(padding layers, waste %) per layer bucket, as vLLM warns them when it groups `stack`
    (get_kv_cache_groups; with pipeline parallel it groups the whole model once)."""
    try:
        groups, _ = sc.groups(stack)
    except PlanError:
        return []  # pages vLLM cannot unify: no grouping, no warning to predict
    if len(groups) < 2:
        return []
    buckets: dict[LayerSpec, int] = {}
    for g in groups:
        buckets[g.spec] = buckets.get(g.spec, 0) + g.layers
    counts = list(buckets.values())
    # Before vLLM PR #29303 the group size was always the smallest bucket.
    size = min(counts) if old_rule else groups[0].layers + groups[0].padding_layers
    out = []
    for c in counts:
        pad = (size - c % size) % size
        if pad:
            out.append((pad, 100.0 * pad / c))
    return out


def _padding_checks(ctx: Ctx) -> None:
    for f in ctx.of("padding"):
        layers = to_int(f.values["layers"])
        pct = f.values["pct"]
        base = scenario(ctx)
        current = _padding(base, base.whole, old_rule=False)
        hit = [p for p in current if p[0] == layers and display_equal(p[1], pct)]
        pred = hit[0] if hit else (current[0] if current else (0, 0.0))
        variants = [
            Variant(
                "version-dependent: before vLLM PR #29303 the group size was always the smallest "
                "layer bucket",
                const(_hit(_padding(base, base.whole, True), layers, pct)),
            )
        ]
        if len(base.stages) > 1:
            for i, stack in enumerate(base.stacks):
                variants.append(
                    Variant(
                        f"version-dependent: this warning groups pipeline stage {i}'s layers on "
                        "their own (a start-up check that groups each worker's layers); the "
                        "cache itself uses the whole model's groups",
                        const(_hit(_padding(base, stack, False), layers, pct)),
                    )
                )
        if ctx.settings.draft == 0:
            for k in (1, 2, 3):
                sc = scenario(ctx, draft=k)
                for old in (False, True):
                    variants.append(
                        Variant(
                            f"the KV cache includes {k} speculative draft layer"
                            f"{'s' if k > 1 else ''} (EAGLE/MTP)"
                            + (" and the grouping rule before vLLM PR #29303" if old else ""),
                            const(_hit(_padding(sc, sc.whole, old), layers, pct)),
                        )
                    )
        judge(
            ctx,
            PADDING,
            f,
            layers,
            predicted=pred[0],
            equal=bool(hit),
            arithmetic=(
                "per layer bucket of the whole model: group_size − bucket % group_size; "
                "waste = padding / bucket: "
                + (", ".join(f"{p} layers = {w:.2f}%" for p, w in current) or "no padding")
            ),
            variants=variants,
        )


def _hit(found: list[tuple[int, float]], layers: int, pct: str) -> Range | None:
    for p, w in found:
        if p == layers and display_equal(w, pct):
            return (layers, layers)
    return None


def _reserves(ctx: Ctx, src: tuple[str, Fact, str] | None) -> None:
    s = ctx.settings
    derivation: list[str] = []
    weights_rank = activation = non_torch = graphs = kv = None
    w = ctx.first("weights")
    if w is not None:
        weights_rank = round(to_float(w.values["gib"]) * GiB)
        derivation.append(f"weights per rank {w.values['gib']} GiB (line {w.line_no})")
        if w.values.get("unit") == "GB":
            ctx.notes.append("vLLM's 'took X GB' weights line divides by 2^30: it is GiB.")
    prof = ctx.first("v1_profile") or ctx.first("v0_breakdown")
    if prof is not None:
        if "activation_gib" in prof.values:
            activation = round(to_float(prof.values["activation_gib"]) * GiB)
        if "non_torch_gib" in prof.values:
            non_torch = round(to_float(prof.values["non_torch_gib"]) * GiB)
        if weights_rank is None and "weights_gib" in prof.values:
            weights_rank = round(to_float(prof.values["weights_gib"]) * GiB)
    p0 = ctx.first("v0_profile")
    if p0 is not None and weights_rank is not None and "peak_torch_memory" in p0.values:
        activation = round(to_float(p0.values["peak_torch_memory"]) * GiB) - weights_rank
        non_torch = round(to_float(p0.values.get("non_torch_memory", "0")) * GiB)
    g = ctx.first("cuda_graph")
    if g is not None:
        graphs = round(to_float(g.values["gib"]) * GiB)
        ctx.notes.append(
            f"CUDA graphs took {g.values['gib']} GiB after the KV cache was allocated: they live "
            "in the 1 − gpu_memory_utilization headroom, not in the KV budget."
        )
    if src is not None:
        kv = round(to_float(src[0]) * GiB)
    reserve = None
    if activation is not None:
        reserve = activation + (non_torch or 0)
        derivation.append(f"reserve = activation peak + non-torch = {gib(reserve)}")
    elif s.gpu_memory_bytes and s.memory_fraction and weights_rank is not None and kv is not None:
        reserve = math.ceil(s.gpu_memory_bytes * s.memory_fraction) - weights_rank - kv
        derivation.append(
            f"reserve = ceil({gib(s.gpu_memory_bytes)} × {s.memory_fraction:g}) − weights − "
            f"available KV = {gib(reserve)}"
        )
        if reserve < 0:
            ctx.notes.append(
                "GPU memory × gpu_memory_utilization is smaller than weights + available KV: "
                "the GPU or utilization assumed here is not the one that wrote the log."
            )
            reserve = None
    elif kv is not None:
        derivation.append(
            "set settings.gpu (or gpu_memory_bytes) and gpu_memory_utilization to learn "
            "reserve_bytes from the available memory"
        )
    if weights_rank is None and reserve is None and kv is None:
        return
    set_reserves(
        ctx,
        derivation,
        weights_rank=weights_rank,
        reserve=reserve,
        activation_peak=activation,
        non_torch=non_torch,
        cuda_graph=graphs,
        kv_budget=kv,
    )


def reconcile_vllm(ctx: Ctx) -> str:
    """Append checks, notes and reserves to `ctx`; return the log format."""
    fmt = "vLLM v1" if ctx.settings.vllm_gen == "v1" else "vLLM v0"
    if ctx.shape is None or ctx.dtype is None:
        _unrecomputable(ctx)
        return fmt
    src = _kv_source(ctx)
    _tokens_checks(ctx, src)
    _concurrency_checks(ctx, src)
    _blocks_checks(ctx, src)
    _v0_profile_checks(ctx)
    _v0_error_checks(ctx, src)
    _v1_error_checks(ctx)
    _padding_checks(ctx)
    _reserves(ctx, src)
    if ctx.shape.is_mla and ctx.settings.block not in (64, 128):
        ctx.notes.append(
            "vLLM's MLA backends force the block size on CUDA (FlashMLA 64, CUTLASS MLA 128); "
            "set block_size if the log's figures were computed with it."
        )
    return fmt


# fact kind -> (the figure, the fact's value it logs), for logs kvplan cannot recompute.
_FIGURES = {
    "kv_tokens": (GPU_TOKENS, "tokens"),
    "max_concurrency": (Figure("max_concurrency", "Maximum concurrency", "x"), "x"),
    "num_blocks": (GPU_BLOCKS, "gpu_blocks"),
    "v0_error": (MAX_TOKENS, "max_tokens"),
    "v1_error": (Figure("kv_needed_gib", "KV cache needed", "GiB"), "needed_gib"),
    "padding": (PADDING, "layers"),
}


def _unrecomputable(ctx: Ctx) -> None:
    for kind, (about, key) in _FIGURES.items():
        for f in ctx.of(kind):
            judge(ctx, about, f, to_float(f.values[key]))


__all__ = ["Scenario", "reconcile_vllm", "scenario"]
