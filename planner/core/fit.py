"""How many requests fit: the engine's pool over the budget, and what its log will say."""

from __future__ import annotations

import math

from planner.core import schema as s
from planner.core.budget.terms import BudgetTerms, StartVerdict
from planner.core.capacity import Pool
from planner.core.inputs import Inputs
from planner.core.memory import explicit_over_memory_text
from planner.core.notes import Note, note
from planner.core.parallel import Stages


def build_pool(inp: Inputs, budget_bytes: int) -> Pool:
    """The pool of the pipeline stage that limits capacity, for a budget per GPU."""
    stages = Stages.of(inp.shape, inp.engine, inp.tp, inp.pp)
    return inp.engine.build_pool(
        stages, inp.kv_dtype, inp.block_size, inp.policy, budget_bytes, inp.sched,
        inp.context_tokens,
    )  # fmt: skip


def capacity(
    inp: Inputs, budget: s.BudgetOut, terms: BudgetTerms | None
) -> tuple[s.CapacityOut, Pool, list[Note]]:
    engine, ctx = inp.engine, inp.context_tokens
    notes: list[Note] = []
    pool = build_pool(inp, budget.kv_budget_bytes)
    # Requests of the planned length that share a prefix (a system prompt) hold it once.
    shared = next(
        (sh for m, sh in zip(inp.mixes, inp.shared_prefix_tokens, strict=True)
         if m.context_tokens == ctx and sh),
        0,
    )  # fmt: skip
    alone = pool.max_requests(ctx)  # what the null block explains, before prefix sharing
    max_req = pool.max_requests_sharing(ctx, shared) if shared else alone
    if shared and max_req != alone:
        notes.append(
            note("capacity.prefix_shared", shared=shared, fit=max_req, alone=alone, ctx=ctx)
        )
    verdict = engine.start_check(inp, budget.kv_budget_bytes, terms, pool)
    over = explicit_over_memory_text(budget) if verdict.starts else None
    if over is not None:
        verdict = StartVerdict(False, "explicit_over_memory", over)
    if not verdict.starts:
        # An engine that refuses to start serves nothing, even where its pool would hold a
        # request (vLLM 0.14–0.16 check the whole model's layers against one PP stage's budget).
        max_req = 0
    reported = pool.reported_concurrency(ctx)
    max_len = inp.max_model_len
    if max_req == 0:
        limited = (
            "weights_exceed_memory" if budget.kv_budget_bytes == 0 else "budget_below_one_request"
        )
    elif max_len and ctx > max_len:
        limited = "context_exceeds_max_position_embeddings"
    else:
        limited = engine.limited_by_memory
    cap = engine.running_cap(inp.request.max_num_seqs, inp.gpu, pool.max_tokens(), max_len or ctx)
    cap = engine.pool_running_cap(pool, cap)
    running = min(max_req, cap) if cap is not None else max_req
    if cap is not None and max_req > cap:
        limited = "max_num_seqs"
        notes.append(
            note(
                "capacity.running_cap",
                fit=max_req,
                ctx=ctx,
                engine=engine.label,
                cap=cap,
                flag=engine.running_cap_flag,
                default_suffix=", its default" if inp.request.max_num_seqs is None else "",
            )
        )
    if reported is not None and alone != math.floor(reported):
        notes.append(
            note(
                "capacity.null_block",
                ctx=ctx,
                reported=reported,
                num_blocks=pool.num_blocks,
                need=pool.blocks_per_request(ctx),
                fit=alone,
            )
        )
    if max_req == 0 and budget.kv_budget_bytes == 0:
        notes.append(
            note("capacity.no_memory" if budget.source == "gpu" else "capacity.budget_zero")
        )
    fits: bool | None = None
    if inp.workload_given:
        fits = pool.fits(
            [(m.context_tokens, m.count) for m in inp.mixes],
            inp.shared_prefix_tokens,
            inp.prefix_reusers,
        )
    longest = pool.longest_context()
    if max_len and longest > max_len:
        notes.append(note("capacity.longest_beyond_max_position", longest=longest, max_len=max_len))
    if not verdict.starts:
        notes.append(
            note(
                "engine.refuses_to_start",
                engine=engine.label,
                error=verdict.error_text or "",
                stage=verdict.stage,  # which start-up check refused (the page words it)
            )
            if verdict.error_text
            else note("engine.no_kv_memory", engine=engine.label)
        )
    pad = sum(g.padding_layers for g in pool.groups)
    if pad:
        notes.append(note("capacity.padding_layers", padding=pad))
    out = s.CapacityOut(
        kv_budget_bytes=budget.kv_budget_bytes,
        num_blocks=pool.num_blocks,
        reserved_blocks=pool.reserved_blocks,
        blocks_per_request=pool.blocks_per_request(ctx),
        max_requests=max_req,
        max_num_seqs=cap,
        max_running_requests=running,
        max_tokens=pool.max_tokens(),
        engine_reported_concurrency=reported,
        engine_reported_tokens=pool.reported_tokens(ctx),
        context_tokens=ctx,
        limited_by=limited,
        longest_context_tokens=longest,
        kv_groups=[
            s.KVGroupOut(
                kind=g.kind,
                layers=g.layers,
                padding_layers=g.padding_layers,
                window_tokens=g.spec.window_tokens,
                block_size=g.block_size,
                blocks_per_request=pool.group_blocks(g, ctx),
            )
            for g in pool.groups
        ],
        budget=budget,
        workload_fits=fits,
        engine_starts=verdict.starts,
        start_error=verdict.error_text,
        estimated_max_model_len=verdict.estimated_max_model_len,
        engine_max_request_tokens=engine.longest_request(pool, max_len),
        engine_max_model_len_estimate=engine.max_model_len_estimate(
            inp, budget.kv_budget_bytes, pool
        ),
        **engine.pool_facts(pool),
    )
    return out, pool, notes


__all__ = ["build_pool", "capacity"]
