"""TensorRT-LLM: blocks of the paged KV cache from free memory (docs/engine-rules.md).

C++ runtime: `Memory usage when calculating max tokens in paged kv cache: total: T GiB,
available: A GiB` → max_tokens = floor(A × free_gpu_memory_fraction / bytes per token), blocks =
ceil(max_tokens / tokens_per_block) (`calculateMaxNumBlocks`; the Python path floors).
PyTorch backend: `available KV cache memory when calculating max tokens: A GiB, …, kv size is S`
(the fraction already applied) → max_tokens = A // S. `[MemUsageChange] Allocated X GiB for max
tokens (N)`: N = blocks × tokens_per_block, X = N × bytes per token / 2^30.
Bytes per token per rank: 2 × layers × ceil(Hkv / tp) × head_dim × dtype bytes.
"""

from __future__ import annotations

import math

from planner.core.errors import Message
from planner.core.logs import Fact, to_float, to_int
from planner.core.model import cdiv
from planner.core.reconcile_common import (
    Ctx,
    Figure,
    Range,
    Variant,
    const,
    gib_bounds,
    judge,
    judge_printed,
    set_reserves,
    whole_stack,
)
from planner.core.units import KVDtype, kv_dtype

PRIMARY_BLOCKS = Figure("primary_blocks", "blocks in KV cache primary pool", "blocks")
ALLOCATED_TOKENS = Figure("allocated_tokens", "max tokens in paged KV cache", "tokens")
ALLOCATED_GIB = Figure("allocated_gib", "Allocated (GiB)", "GiB")


def bytes_per_token(ctx: Ctx, dtype: KVDtype | None = None, tp: int | None = None) -> int:
    assert ctx.shape is not None and ctx.dtype is not None
    d = dtype or ctx.dtype
    return sum(c * d.bytes_for(s.elements_per_token) for s, c in whole_stack(ctx, tp))


def _blocks(budget: int, bpt: int, tpb: int, ceil: bool = True) -> int:
    tokens = budget // bpt
    return cdiv(tokens, tpb) if ceil else tokens // tpb


def _primary_check(ctx: Ctx, f: Fact, free: Fact) -> None:
    s = ctx.settings
    frac = s.memory_fraction or 0.9
    text = free.values["available_gib"]
    lo, mid, hi = gib_bounds(text)
    bpt = bytes_per_token(ctx)
    tpb = s.block

    def window(bpt_: int, tpb_: int, frac_: float, ceil: bool = True) -> Range:
        return (
            _blocks(math.floor(lo * frac_), bpt_, tpb_, ceil),
            _blocks(math.floor(hi * frac_), bpt_, tpb_, ceil),
        )

    pred = _blocks(math.floor(mid * frac), bpt, tpb)
    variants = [
        Variant(
            Message.of("reason.trtllm_tokens_per_block", t=t),
            const(window(bpt, t, frac)),
        )
        for t in (8, 16, 32, 64, 128)
        if t != tpb
    ]
    assert ctx.dtype is not None
    other = kv_dtype("fp8") if ctx.dtype.bits >= 16 else kv_dtype("fp16")
    variants.append(
        Variant(
            Message.of("reason.matches_other_kv_dtype", dtype=other.name),
            lambda: window(bytes_per_token(ctx, other), tpb, frac),
        )
    )
    for fr in (0.85, 0.9, 0.95):
        if abs(fr - frac) > 1e-9:
            variants.append(
                Variant(
                    Message.of("reason.trtllm_memory_fraction", fr=fr), const(window(bpt, tpb, fr))
                )
            )
    span = window(bpt, tpb, frac)
    judge(
        ctx,
        PRIMARY_BLOCKS,
        f,
        to_int(f.values["blocks"]),
        predicted=pred,
        admitted=span,
        blocks_range=(int(span[0]), int(span[1])),
        arithmetic=f"ceil(floor({text} GiB × {frac:g} / {bpt:,} B per token) / {tpb} tokens "
        f"per block) = {pred:,} (C++ calculateMaxNumBlocks rounds up; the Python path "
        f"floors: {_blocks(math.floor(mid * frac), bpt, tpb, ceil=False):,})",
        variants=variants,
    )


def reconcile_trtllm(ctx: Ctx) -> str:
    s = ctx.settings
    free = ctx.first("free_memory")
    prof = ctx.first("profile")
    primary = ctx.first("primary_blocks")
    fmt = "TensorRT-LLM (C++ runtime)" if free or primary else "TensorRT-LLM"
    if prof is not None:
        fmt = "TensorRT-LLM (PyTorch backend)"
    known = ctx.shape is not None and ctx.dtype is not None
    if primary is not None:
        if free is not None and known:
            _primary_check(ctx, primary, free)
        else:
            judge(
                ctx,
                PRIMARY_BLOCKS,
                primary,
                to_int(primary.values["blocks"]),
                reason=None if not known else Message.of("reason.trtllm_no_memory_line"),
            )
    if prof is not None and "kv_bytes_per_token" in prof.values and known:
        bpt = bytes_per_token(ctx)
        judge(
            ctx,
            Figure("kv_bytes_per_token", "kv size (bytes per token)", "B"),
            prof,
            to_int(prof.values["kv_bytes_per_token"]),
            predicted=bpt,
            arithmetic=f"Σ layers 2 × ceil(Hkv / {s.tp}) × head_dim × bytes "
            f"= {bpt:,} B per token per rank",
        )
    for f in ctx.of("allocated"):
        tokens = to_int(f.values["tokens"])
        if primary is not None:
            b = to_int(primary.values["blocks"])
            judge(
                ctx,
                ALLOCATED_TOKENS,
                f,
                tokens,
                predicted=b * s.block,
                arithmetic=f"logged {b:,} primary blocks × {s.block} tokens per block",
            )
        elif prof is not None and "kv_bytes_per_token" in prof.values:
            lo, mid, hi = gib_bounds(prof.values["available_gib"])
            size = to_int(prof.values["kv_bytes_per_token"])
            judge(
                ctx,
                ALLOCATED_TOKENS,
                f,
                tokens,
                predicted=mid // size,
                admitted=(lo // size, hi // size),
                arithmetic=f"{prof.values['available_gib']} GiB // {size:,} B per token",
            )
        if not known:
            judge(ctx, ALLOCATED_GIB, f, to_float(f.values["gib"]))
            continue
        bpt = bytes_per_token(ctx)
        pred = tokens * bpt / (1 << 30)
        judge_printed(
            ctx,
            ALLOCATED_GIB,
            f,
            f.values["gib"],
            pred,
            arithmetic=f"{tokens:,} tokens × {bpt:,} B per token per rank / 2^30 = {pred:.3f}",
        )
        if tokens % s.block:
            ctx.notes.add(
                "reconcile.trtllm.tokens_not_block_multiple", tokens=tokens, block=s.block
            )
    for f in ctx.of("using_tokens"):
        tokens = to_int(f.values["tokens"])
        blocks = cdiv(tokens, s.block)
        judge(
            ctx,
            Figure("kv_tokens", "tokens in paged KV cache", "tokens"),
            f,
            tokens,
            reason=Message.of(
                "reason.trtllm_old_log_no_free_memory",
                blocks=blocks,
                block=s.block,
                tokens=blocks * s.block,
            ),
        )
    if free is not None or prof is not None:
        src = free or prof
        assert src is not None
        text = src.values["available_gib"]
        frac = 1.0 if src is prof else (s.memory_fraction or 0.9)
        kv = round(to_float(text) * frac * (1 << 30))
        derivation = [Message.of("derivation.trtllm_kv_budget", available=text, fraction=frac)]
        total = src.values.get("total_gib")
        if total is not None:
            derivation.append(
                Message.of("derivation.trtllm_weights_activations", total=total, available=text)
            )
        set_reserves(ctx, derivation, kv_budget=kv)
    return fmt


__all__ = ["bytes_per_token", "reconcile_trtllm"]
