"""vLLM's capacity lines recomputed: `GPU KV cache size`, `Maximum concurrency`, `# GPU blocks`
(and CPU blocks), and v0's memory-profiling arithmetic."""

from __future__ import annotations

from collections.abc import Callable

from planner.core.capacity import Pool
from planner.core.engines.vllm.scenario import (
    GPU_BLOCKS,
    GPU_TOKENS,
    KvSource,
    as_vllm,
    budget_window,
    by_budget,
    readings,
    scenario,
)
from planner.core.errors import Message
from planner.core.logs import Fact, to_float, to_int
from planner.core.reconcile_common import Ctx, Figure, gib, judge, judge_printed, unique_facts
from planner.core.units import GiB


def _min_workers_hint(ctx: Ctx) -> Message | None:
    workers = ctx.settings.tp * ctx.settings.pp
    seen = len(ctx.of("available_kv"))
    if workers > 1 and seen < workers:
        return Message.of("reason.likely_min_over_workers", workers=workers, seen=seen)
    return None


def _tokens_at(max_model_len: int) -> Callable[[Pool], float]:
    """The logged "GPU KV cache size" of a pool, for a max_model_len."""
    return lambda p: p.reported_tokens(max_model_len)


def tokens_checks(ctx: Ctx, src: KvSource | None) -> None:
    for f in unique_facts(ctx.of("kv_tokens"), "tokens"):
        logged = to_int(f.values["tokens"])
        if src is None:
            reason = Message.of("reason.no_available_kv_line")
            judge(ctx, GPU_TOKENS, f, logged, reason=reason)
            continue
        text = src[0]
        max_len = ctx.settings.max_model_len
        if as_vllm(ctx).tokens_from_concurrency and max_len is None:
            reason = Message.of("reason.tokens_need_max_model_len")
            judge(ctx, GPU_TOKENS, f, logged, reason=reason)
            continue
        length = max_len or 1
        pred, window, blocks, pool = by_budget(ctx, text, _tokens_at(length))
        groups = len(pool.groups)
        bs = min(g.block_size for g in pool.groups)
        head = (
            f"{scenario(ctx).describe()}; floor({text} GiB / that) = {pool.num_blocks:,} blocks; "
        )
        if as_vllm(ctx).tokens_from_concurrency:
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
        if groups > 1 and not as_vllm(ctx).tokens_from_concurrency:
            ctx.notes.add("reconcile.vllm.hybrid_tokens_divided", groups=groups)
        judge(
            ctx,
            GPU_TOKENS,
            f,
            logged,
            predicted=pred,
            admitted=window,
            blocks_range=blocks,
            arithmetic=arithmetic,
            variants=readings(ctx, budget_window(text, _tokens_at(length))),
            likely=_min_workers_hint(ctx) if logged < pred else None,
        )


def _concurrency(pool_blocks: int, need: int, v0: bool, bs: int, ctx_tokens: int) -> float:
    if v0:
        return round(pool_blocks * bs / ctx_tokens, 2)
    return round(pool_blocks / need, 2)


def concurrency_checks(ctx: Ctx, src: KvSource | None) -> None:
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
        bs = base.block
        in_flight = base.sched.in_flight_tokens
        per_group = " + ".join(f"{g.blocks_needed(c, in_flight):,}" for g in pool.groups)
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

            pred, window, blocks, mid = by_budget(ctx, text, conc)
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
                variants=readings(ctx, budget_window(text, conc)),
            )
        elif blocks_fact is not None:
            b = to_int(blocks_fact.values["gpu_blocks"])
            pred = _concurrency(b, need, v0, bs, c)
            judge_printed(ctx, about, f, x, pred, arithmetic=f"logged {b:,} {how} = {pred:.2f}x")
        elif tokens_fact is not None and as_vllm(ctx).tokens_from_concurrency:
            concurrency_from_tokens(ctx, f, to_int(tokens_fact.values["tokens"]))
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
            reason = Message.of("reason.nothing_to_divide")
            judge(ctx, about, f, to_float(x), reason=reason)


def concurrency_from_tokens(ctx: Ctx, f: Fact, tokens: int) -> None:
    """From 0.20.1 the tokens line is int(max_concurrency × max_model_len) (releases.py,
    TOKENS_FROM_CONCURRENCY_SINCE): the logged tokens bound the logged concurrency whatever the
    model, so this needs neither a model nor the available memory."""
    c = to_int(f.values["context_tokens"])
    lo, hi = tokens / c, (tokens + 1) / c
    judge_printed(
        ctx,
        Figure("max_concurrency", f"Maximum concurrency for {c:,} tokens", "x"),
        f,
        f.values["x"],
        lo,
        admitted=(lo, hi),
        arithmetic=(
            f"from the logged {tokens:,} tokens = int(max_concurrency × {c:,}) "
            f"(vLLM {ctx.engine.version_text}): max_concurrency in [{lo:.5f}, {hi:.5f})"
        ),
    )


def blocks_checks(ctx: Ctx, src: KvSource | None) -> None:
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
                reason=Message.of(
                    "reason.blocks_only", logged=logged, cost=cost, memory=gib(logged * cost)
                ),
            )
        else:
            text = src[0]
            pred, window, blocks, _ = by_budget(ctx, text, lambda p: p.num_blocks)
            judge(
                ctx,
                GPU_BLOCKS,
                f,
                logged,
                predicted=pred,
                admitted=window,
                blocks_range=blocks,
                arithmetic=f"{base.describe()}; floor({text} GiB / {cost:,} B) = {int(pred):,}",
                variants=readings(ctx, budget_window(text, lambda p: p.num_blocks)),
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


def v0_profile_checks(ctx: Ctx) -> None:
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


__all__ = ["blocks_checks", "concurrency_checks", "tokens_checks", "v0_profile_checks"]
