"""SGLang: the token pool and its K/V sizes (docs/engine-rules.md).

Budget = free memory after weights − free memory before weights × (1 − mem_fraction_static),
both from the `Load weight begin/end … avail mem=X GB` lines; max_total_num_tokens =
budget // cell, rounded down to page_size. `K size` = tokens × layers × KV heads per rank ×
head_dim × bytes / 2^30 (SGLang's "GB" divides by 2^30: it is GiB).
"""

from __future__ import annotations

import math

from planner.core.engines.base import Scheduling
from planner.core.errors import Message
from planner.core.logs import Fact, half_unit, to_float, to_int
from planner.core.parallel import Stages
from planner.core.reconcile_common import (
    Ctx,
    Figure,
    Variant,
    gib,
    judge,
    judge_printed,
    set_reserves,
    whole_stack,
)
from planner.core.units import GiB, KVDtype, kv_dtype

TOKENS = Figure("max_total_num_tokens", "KV cache tokens (#tokens)", "tokens")


def _size_checks(ctx: Ctx, f: Fact) -> None:
    assert ctx.dtype is not None
    tokens = to_int(f.values["tokens"])
    stack = whole_stack(ctx)
    b = ctx.dtype.bytes_per_element
    k_elems = sum(c * s.kv_heads * s.head_size for s, c in stack)
    v_elems = sum(c * s.kv_heads * s.head_size_v for s, c in stack)
    mla = ctx.shape is not None and ctx.shape.is_mla
    parts = (
        [("kv_gb", "KV size", k_elems + v_elems)]
        if mla
        else [("k_gb", "K size", k_elems), ("v_gb", "V size", v_elems)]
    )
    for key, label, elems in parts:
        if key not in f.values:
            continue
        pred = tokens * elems * b / GiB
        judge_printed(
            ctx,
            Figure(key.replace("_gb", "_size_gib"), label, "GiB"),
            f,
            f.values[key],
            pred,
            arithmetic=f"{tokens:,} tokens × {elems:,} elements per token (all layers, per "
            f"rank) × {b:g} B / 2^30 = {pred:.3f} (SGLang's 'GB' is GiB)",
            variants=_dtype_variant(ctx, tokens, elems, f.values[key]),
        )


def _dtype_variant(ctx: Ctx, tokens: int, elems: int, text: str) -> list[Variant]:
    assert ctx.dtype is not None
    other: KVDtype = kv_dtype("fp8") if ctx.dtype.bits >= 16 else kv_dtype("bf16")
    value = tokens * elems * other.bytes_per_element / GiB
    h = half_unit(text)
    return [
        Variant(
            Message.of("reason.matches_other_kv_dtype", dtype=other.name),
            lambda: (value - h, value + h),
        )
    ]


def _budget(ctx: Ctx) -> tuple[int, int, int, str] | None:
    begin, end = ctx.first("load_begin"), ctx.first("load_end")
    f = ctx.settings.memory_fraction
    if begin is None or end is None or f is None:
        return None
    pre, post = begin.values["avail_gb"], end.values["avail_gb"]
    p, q = to_float(pre), to_float(post)
    hp, hq = half_unit(pre), half_unit(post)
    mid = (q - p * (1 - f)) * GiB
    lo = ((q - hq) - (p + hp) * (1 - f)) * GiB
    hi = ((q + hq) - (p - hp) * (1 - f)) * GiB
    how = f"{post} − {pre} × (1 − {f:g}) = {mid / GiB:.4f} GiB"
    return max(0, math.ceil(lo)), max(0, int(mid)), max(0, math.floor(hi)), how


def _tokens_check(ctx: Ctx, f: Fact, budget: tuple[int, int, int, str] | None) -> None:
    assert ctx.dtype is not None
    logged = to_int(f.values["tokens"])
    if budget is None:
        missing: list[Message] = []
        if ctx.first("load_begin") is None:
            missing.append(Message.of("reason.sglang_needs_load_begin"))
        if ctx.first("load_end") is None:
            missing.append(Message.of("reason.sglang_needs_load_end"))
        if ctx.settings.memory_fraction is None:
            missing.append(Message.of("reason.sglang_needs_fraction"))
        named = dict(zip(("a", "b", "c"), missing, strict=False))
        reason = Message.of(
            {
                1: "reason.sglang_budget_needs_1",
                2: "reason.sglang_budget_needs_2",
                3: "reason.sglang_budget_needs_3",
            }.get(len(missing), "reason.sglang_budget_needs_1"),
            **named,
        )
        judge(ctx, TOKENS, f, logged, reason=reason)
        return
    lo, mid, hi, how = budget

    shape, dtype = ctx.shape, ctx.dtype
    assert shape is not None

    def tokens(budget_bytes: int) -> int:
        mnbt = ctx.settings.max_num_batched_tokens
        pool = ctx.engine.build_pool(
            Stages((whole_stack(ctx),)),
            dtype,
            ctx.settings.block,
            ctx.engine.window_policy(shape, hybrid_manager=True, explicit_windows=False),
            budget_bytes,
            Scheduling(mnbt, None, mnbt, 1),
            ctx.settings.max_model_len or 1,
        )
        return pool.num_blocks * pool.unit_tokens

    pred = tokens(mid)
    cell = ctx.dtype.bytes_for(sum(c * s.elements_per_token for s, c in whole_stack(ctx)))
    judge(
        ctx,
        TOKENS,
        f,
        logged,
        predicted=pred,
        admitted=(tokens(lo), tokens(hi)),
        blocks_range=(tokens(lo), tokens(hi)),
        arithmetic=f"budget {how}; cell = {cell:,} B per token (all layers, per rank); "
        f"budget // cell, rounded down to page_size {ctx.settings.block} = {pred:,}",
    )


def reconcile_sglang(ctx: Ctx) -> str:
    alloc = ctx.first("kv_allocated") or ctx.first("max_total_tokens")
    if ctx.shape is None or ctx.dtype is None:
        for f in ctx.of("kv_allocated") + ctx.of("max_total_tokens"):
            judge(ctx, TOKENS, f, to_int(f.values["tokens"]))
        return "SGLang"
    budget = _budget(ctx)
    if alloc is not None:
        _tokens_check(ctx, alloc, budget)
    for f in ctx.of("kv_allocated"):
        _size_checks(ctx, f)
    end = ctx.first("load_end")
    weights_rank = (
        round(to_float(end.values["usage_gb"]) * GiB)
        if end and "usage_gb" in (end.values)
        else None
    )
    if weights_rank is not None or budget is not None:
        set_reserves(
            ctx,
            [
                Message.of("derivation.sglang_kv_budget", how=budget[3])
                if budget
                else Message.of("derivation.sglang_no_budget"),
                Message.of("derivation.sglang_weights", weights=gib(weights_rank))
                if weights_rank is not None
                else Message.of("derivation.sglang_no_weights"),
            ],
            weights_rank=weights_rank,
            kv_budget=budget[1] if budget else None,
        )
    pool_end = ctx.first("pool_end")
    if pool_end is not None:
        ctx.notes.add("reconcile.sglang.free_after_pool", avail_gib=pool_end.values["avail_gb"])
    return "SGLang"


__all__ = ["reconcile_sglang"]
