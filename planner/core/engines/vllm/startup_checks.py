"""vLLM's start-up checks recomputed: v0's "maximum number of tokens" and v1's "KV cache is
needed" / "estimated maximum model length" errors, and the padding-layer warnings."""

from __future__ import annotations

from planner.core.engines.vllm.scenario import (
    MAX_TOKENS,
    PADDING,
    KvSource,
    Scenario,
    by_budget,
    readings,
    scenario,
)
from planner.core.errors import Message, PlanError
from planner.core.logs import to_int
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
    unique_facts,
)
from planner.core.specs import LayerSpec, Stack
from planner.core.units import GiB


def _draft_reason(k: int, old_grouping: bool) -> Message:
    """The padding explained by k draft layers (and the grouping rule before vLLM #29303)."""
    if old_grouping:
        return Message.of(
            "reason.draft_layer_old_grouping" if k == 1 else "reason.draft_layers_old_grouping",
            k=k,
        )
    return Message.of(
        "reason.draft_layer_in_cache" if k == 1 else "reason.draft_layers_in_cache", k=k
    )


def v0_error_checks(ctx: Ctx, src: KvSource | None) -> None:
    for f in unique_facts(ctx.of("v0_error"), "max_tokens"):
        logged = to_int(f.values["max_tokens"])
        base = scenario(ctx)
        bs = base.block
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
            pred, window, span, _ = by_budget(
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
                reason=Message.of(
                    "reason.v0_no_kv_memory",
                    logged=logged,
                    implied=implied,
                    cost=cost,
                    memory=gib(implied * cost),
                ),
            )


def v1_error_checks(ctx: Ctx) -> None:
    for f in ctx.of("v1_error"):
        v = f.values
        if "max_model_len" not in v:
            continue
        length = to_int(v["max_model_len"])
        base = scenario(ctx)
        needed = base.need()(length)
        whole = scenario(ctx, whole_model=True) if ctx.settings.pp > 1 else None
        variants: list[Variant] = []
        if whole is not None:
            w = whole.need()(length)
            span_w: Range = (w / GiB - 0.005, w / GiB + 0.005)
            variants.append(
                Variant(
                    Message.of(
                        "reason.pp_check_charges_all_layers",
                        layers=ctx.shape.num_hidden_layers if ctx.shape else 0,
                        needed=gib(w),
                    ),
                    const(span_w),
                )
            )
        judge_printed(
            ctx,
            Figure("kv_needed_gib", f"KV cache needed for {length:,} tokens", "GiB"),
            f,
            v["needed_gib"],
            needed / GiB,
            arithmetic=f"cdiv({length:,}, {base.block}) blocks × per-block bytes of "
            f"the largest stage = {needed:,} B = {needed / GiB:.3f} GiB",
            variants=variants,
        )
        if "estimated_max_model_len" in v and "available_gib" in v:
            lo, mid, hi = gib_bounds(v["available_gib"])
            pred = base.estimate(mid)
            window = (base.estimate(lo), base.estimate(hi))
            est_variants: list[Variant] = []
            if whole is not None:
                est_variants.append(
                    Variant(
                        Message.of("reason.pp_estimate_all_layers"),
                        const((whole.estimate(lo), whole.estimate(hi))),
                    )
                )

            def longest(sc: Scenario, lo: int = lo, hi: int = hi) -> Range:
                return (sc.estimate(lo), sc.estimate(hi))

            judge(
                ctx,
                Figure("estimated_max_model_len", "estimated maximum model length", "tokens"),
                f,
                to_int(v["estimated_max_model_len"]),
                predicted=pred,
                admitted=window,
                arithmetic=f"largest length whose KV fits "
                f"{v['available_gib']} GiB: {pred:,} tokens",
                variants=est_variants + readings(ctx, longest),
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


def padding_checks(ctx: Ctx) -> None:
    for f in ctx.of("padding"):
        layers = to_int(f.values["layers"])
        pct = f.values["pct"]
        base = scenario(ctx)
        current = _padding(base, base.whole, old_rule=False)
        hit = [p for p in current if p[0] == layers and display_equal(p[1], pct)]
        pred = hit[0] if hit else (current[0] if current else (0, 0.0))
        variants = [
            Variant(
                Message.of("reason.padding_old_group_rule"),
                const(_hit(_padding(base, base.whole, True), layers, pct)),
            )
        ]
        if len(base.stages) > 1:
            for i, stack in enumerate(base.stacks):
                variants.append(
                    Variant(
                        Message.of("reason.padding_per_stage", i=i),
                        const(_hit(_padding(base, stack, False), layers, pct)),
                    )
                )
        if ctx.settings.draft == 0 and not (ctx.shape and ctx.shape.draft_layers):
            for k in (1, 2, 3):
                sc = scenario(ctx, draft=k)
                for old in (False, True):
                    variants.append(
                        Variant(
                            _draft_reason(k, old),
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


__all__ = ["padding_checks", "v0_error_checks", "v1_error_checks"]
