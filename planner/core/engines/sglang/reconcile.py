"""SGLang: the token pool and its K/V sizes (docs/engine-rules.md).

Budget = free memory after weights − free memory before weights × (1 − mem_fraction_static),
both from the `Load weight begin/end … avail mem=X GB` lines (less 100 MiB for a multimodal
model's embedding cache); max_total_num_tokens = budget // cell, rounded down to page_size.
`K size` = tokens × layers × KV heads per rank × head_dim × bytes / 2^30 (SGLang's "GB" divides
by 2^30: it is GiB). A hybrid SWA model prints a "Full" and an "SWA" line, each pool's tokens
and sizes over its own layers; a Mamba-ish model prints its state pool ("Mamba Cache is
allocated. max_mamba_cache_size: …"), whose slots come out of the budget first (state.py).
"""

from __future__ import annotations

import math
from dataclasses import replace

from planner.core.capacity import Pool
from planner.core.engines.base import Scheduling
from planner.core.engines.sglang import Sglang
from planner.core.engines.sglang import multimodal as mm
from planner.core.engines.sglang import state as st
from planner.core.engines.sglang.pools import StateTokenPool, SwaTokenPool
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
from planner.core.specs import Stack
from planner.core.units import GiB, KVDtype, kv_dtype

TOKENS = Figure("max_total_num_tokens", "KV cache tokens (#tokens)", "tokens")
SWA_TOKENS = Figure("swa_max_total_num_tokens", "SWA KV cache tokens (#tokens)", "tokens")
STATE_SLOTS = Figure("max_mamba_cache_size", "Mamba cache slots (max_mamba_cache_size)", "slots")


def _size_checks(ctx: Ctx, f: Fact) -> None:
    assert ctx.dtype is not None
    tokens = to_int(f.values["tokens"])
    stack = _stack(ctx)
    if f.kind in ("swa_kv_allocated", "full_kv_allocated"):  # that pool's layers alone
        stack = tuple((s, c) for s, c in stack if s.is_window == (f.kind == "swa_kv_allocated"))
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
    if ctx.shape is not None and mm.is_multimodal(ctx.shape.architectures):
        lo, mid, hi = (x - mm.VLM_CACHE_BYTES for x in (lo, mid, hi))
        how += f" − {mm.VLM_CACHE_BYTES / GiB:.4f} GiB (multimodal embedding cache)"
    return max(0, math.ceil(lo)), max(0, int(mid)), max(0, math.floor(hi)), how


def _stack(ctx: Ctx) -> Stack:
    """A rank's layers: with state layers every layer's group (a Falcon-H1 layer is an attention
    and a Mamba mixer side by side, so counting layers by index would drop half)."""
    assert ctx.shape is not None
    if ctx.shape.has_state:
        return Stages.of(ctx.shape, ctx.engine, ctx.settings.tp, 1).stacks[0]
    return whole_stack(ctx)


def _pool(ctx: Ctx, budget_bytes: int, state_slots: int | None = None) -> Pool:
    """The pools from a budget; `state_slots`: the state pool the log printed (its slots come
    out of the budget first, so the KV tokens follow from them, not from a recomputed count)."""
    assert ctx.shape is not None and ctx.dtype is not None
    mnbt = ctx.settings.max_num_batched_tokens
    engine = ctx.engine
    if state_slots is not None and isinstance(engine, Sglang):
        engine = replace(engine, max_mamba_cache_size=state_slots)
    return engine.build_pool(
        Stages((_stack(ctx),)),
        ctx.dtype,
        ctx.settings.block,
        ctx.engine.window_policy(ctx.shape, hybrid_manager=True, explicit_windows=False),
        budget_bytes,
        Scheduling(mnbt, None, mnbt, 1),
        ctx.settings.max_model_len or 1,
    )


def _second_pools(ctx: Ctx, budget: tuple[int, int, int, str] | None) -> None:
    """The SWA pool's tokens and the state pool's slots (and its two sizes) against the
    budget's pools; without a budget, the state sizes from the logged slots alone."""
    swa = ctx.first("swa_kv_allocated")
    mamba = ctx.first("mamba_allocated")
    pools = tuple(_pool(ctx, b) for b in budget[:3]) if budget is not None else None
    how = f"budget {budget[3]}" if budget is not None else ""
    if swa is not None:
        logged = to_int(swa.values["tokens"])
        if pools is not None and all(isinstance(p, SwaTokenPool) for p in pools):
            lo, mid, hi = (p.swa_pool_tokens for p in pools if isinstance(p, SwaTokenPool))
            judge(ctx, SWA_TOKENS, swa, logged, predicted=mid, admitted=(lo, hi),
                  arithmetic=f"{how}; SWA tokens = int(full tokens × swa_full_tokens_ratio), "
                  f"rounded down to page_size = {mid:,}")  # fmt: skip
        else:
            judge(ctx, SWA_TOKENS, swa, logged)
    if mamba is None:
        return
    slots = to_int(mamba.values["slots"])
    states = [p.state for p in pools or () if isinstance(p, StateTokenPool)]
    if len(states) == 3:
        lo, mid, hi = (x.slots for x in states)
        judge(ctx, STATE_SLOTS, mamba, slots, predicted=mid, admitted=(lo, hi),
              arithmetic=f"{how}; slots = int((rest × r / (1 + r) − slot) // slot), slot = "
              f"{states[1].slot_bytes:,} B = {mid:,}")  # fmt: skip
    else:
        judge(ctx, STATE_SLOTS, mamba, slots)
    ssm_dtype = getattr(ctx.engine, "mamba_ssm_dtype", None)
    conv_b, ssm_b = st.slot_parts(_stack(ctx), ssm_dtype)
    for key, label, per in (
        ("conv_gb", "conv_state size", conv_b),
        ("ssm_gb", "ssm_state size", ssm_b),
    ):
        if key not in mamba.values or not per:
            continue
        pred = (slots + 1) * per / GiB
        how_size = f"({slots:,} slots + 1 padding) × {per:,} B / 2^30 = {pred:.3f}"
        figure = Figure(key.replace("_gb", "_size_gib"), label, "GiB")
        judge_printed(ctx, figure, mamba, mamba.values[key], pred, arithmetic=how_size)


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

    mamba = ctx.first("mamba_allocated")
    slots = to_int(mamba.values["slots"]) if mamba is not None else None

    def tokens(budget_bytes: int) -> int:
        pool = _pool(ctx, budget_bytes, slots)
        return pool.num_blocks * pool.unit_tokens

    pred = tokens(mid)
    cell = ctx.dtype.bytes_for(sum(c * s.elements_per_token for s, c in _stack(ctx)))
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
    kinds = ("full_kv_allocated", "kv_allocated", "max_total_tokens")
    alloc = next((f for k in kinds for f in ctx.of(k)), None)
    if ctx.shape is None or ctx.dtype is None:
        for f in [f for k in (*kinds, "swa_kv_allocated") for f in ctx.of(k)]:
            judge(ctx, TOKENS if f.kind != "swa_kv_allocated" else SWA_TOKENS, f,
                  to_int(f.values["tokens"]))  # fmt: skip
        for f in ctx.of("mamba_allocated"):
            judge(ctx, STATE_SLOTS, f, to_int(f.values["slots"]))
        return "SGLang"
    budget = _budget(ctx)
    if alloc is not None:
        _tokens_check(ctx, alloc, budget)
    _second_pools(ctx, budget)
    for f in ctx.of("full_kv_allocated") + ctx.of("swa_kv_allocated") + ctx.of("kv_allocated"):
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
