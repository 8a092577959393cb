"""What the page shows beyond the `Plan` itself: memory per GPU split into parts, the capacity
at other context lengths, and which of the textbook formulas reproduce the engine's numbers.

Pure functions of a `Plan` (and, for the sweep, of its `PlanRequest`): no HTTP, no templates.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from planner.core.errors import PlanError
from planner.core.inputs import CalibrationLike
from planner.core.plan import MLA_FORMULA_REMARK, STATE_FORMULA_END, STATE_FORMULA_JOIN
from planner.core.schema import Plan, PlanRequest
from planner.core.variants import Replanner
from planner.service import default_catalog

MAX_SWEEP_POINTS = 12
FIRST_SWEEP_TOKENS = 1024


@dataclass(frozen=True, slots=True)
class Segment:
    """One part of a GPU's memory; `key` names it (and its colour) in the template."""

    key: str
    bytes: int


@dataclass(frozen=True, slots=True)
class MemoryView:
    total_bytes: int
    segments: tuple[Segment, ...]
    requests: int
    # The workload needs more KV memory than the budget holds.
    overflow: bool
    # Weights and reserves past the engine's share of the GPU (its KV figure is then negative,
    # the `kv_short` segment); 0 when they fit. `share_bytes`: where that share ends.
    over_bytes: int = 0
    share_bytes: int = 0


def memory_view(plan: Plan) -> MemoryView | None:
    """Memory of one GPU (the largest pipeline stage's rank) with the KV cache full.

    KV in use is the workload when one was given, else `max_requests` requests of the context.
    Paging waste is the paged minus the logical bytes of those requests: every layer pages the
    same tokens, so the whole-model ratio holds on each rank.

    The segments of a GPU add up to its memory. When weights and reserves outgrow the engine's
    share, the KV cache is the engine's own negative figure ("Available KV cache memory:
    -21.42 GiB"), so the total still is the GPU's memory and the overflow is stated.
    """
    cap = plan.capacity
    if cap is None:
        return None
    totals = plan.totals
    if cap.workload_fits is not None:
        requests = totals.requests
        logical = totals.per_rank_kv_bytes
        ratio = totals.paged_kv_bytes / totals.kv_bytes if totals.kv_bytes else 1.0
    else:
        requests = cap.max_requests
        one = plan.requests[0]
        logical = requests * totals.per_rank_kv_bytes
        ratio = one.paged_kv_bytes / one.kv_bytes if one.kv_bytes else 1.0
    paged = round(logical * ratio)
    budget = cap.kv_budget_bytes
    parts: list[Segment] = []
    b = cap.budget
    on_gpu = b.source == "gpu" and bool(b.gpu_memory_bytes)
    if on_gpu:
        parts.append(Segment("weights", b.weights_bytes_per_rank or 0))
        if b.activation_peak_bytes is not None:
            # The engine's own terms (activation peak, non-torch memory, CUDA graphs where the
            # release subtracts them) in place of one reserve.
            parts.append(Segment("activation", b.activation_peak_bytes))
            parts.append(Segment("non_torch", b.non_torch_bytes or 0))
            if b.cuda_graph_subtracted and b.cuda_graph_bytes:
                parts.append(Segment("cuda_graphs", b.cuda_graph_bytes))
        else:
            parts.append(Segment("reserve", b.reserve_bytes or 0))
    fixed = sum(p.bytes for p in parts)
    short = 0
    if on_gpu and b.engine_available_bytes is not None and b.engine_available_bytes < 0:
        short = b.engine_available_bytes
    if short:
        parts.append(Segment("kv_short", short))
    else:
        parts += [
            Segment("kv_used", min(logical, budget)),
            Segment("waste", max(0, min(paged, budget) - min(logical, budget))),
            Segment("kv_free", max(0, budget - paged)),
        ]
    if not on_gpu:
        return MemoryView(budget, tuple(parts), requests, overflow=paged > budget)
    memory = b.gpu_memory_bytes or 0
    # The rest of the GPU: what the engine is not given (1 − utilization), so the parts add up
    # to the GPU's memory whatever the engine's figure is.
    parts.append(Segment("unallocated", memory - sum(p.bytes for p in parts)))
    return MemoryView(
        memory,
        tuple(parts),
        requests,
        overflow=paged > budget,
        over_bytes=-short,
        share_bytes=fixed + short,
    )


def sweep_contexts(plan: Plan) -> list[int]:
    """Context lengths for the charts: the core's decode sweep, else powers of two from 1k."""
    if plan.bounds is not None and plan.bounds.context_sweep:
        return [p.context_tokens for p in plan.bounds.context_sweep]
    ctx = plan.capacity.context_tokens if plan.capacity else FIRST_SWEEP_TOKENS
    top = max(ctx, plan.model.max_position_embeddings or ctx, FIRST_SWEEP_TOKENS)
    out: list[int] = []
    length = FIRST_SWEEP_TOKENS
    while length <= top and len(out) < MAX_SWEEP_POINTS:
        out.append(length)
        length *= 2
    return out


def plans_by_context(
    request: PlanRequest, contexts: list[int], calibration: CalibrationLike | None = None
) -> dict[int, Plan]:
    """The plan at each context length (no workload: as many requests of that length as run),
    under the same model, engine, budget and bandwidth; a length the planner refuses is left
    out. Every chart point is read from one of these, so a column is the plan at its length."""
    replan = Replanner(default_catalog(), calibration)
    results = replan.over(request, ({"context_tokens": c, "requests": None} for c in contexts))
    return {
        ctx: r for ctx, r in zip(contexts, results, strict=True) if not isinstance(r, PlanError)
    }


def capacity_by_context(request: PlanRequest, contexts: list[int]) -> list[tuple[int, int]]:
    """(context, max requests of that length) under the same model, engine and budget."""
    plans = plans_by_context(request, contexts)
    return [
        (ctx, found.capacity.max_requests)
        for ctx in contexts
        if (found := plans.get(ctx)) is not None and found.capacity is not None
    ]


@dataclass(frozen=True, slots=True)
class BlockMath:
    """The textbook steps, each shown only where it reproduces the engine's own number."""

    block_bytes: int | None  # page × layers per rank, when budget // it == num_blocks
    blocks_per_request_simple: bool  # blocks_per_request == ceil(context / block_size)
    max_requests_simple: bool  # max == (num_blocks - reserved) // blocks_per_request
    # The layers in block_bytes: those holding KV per token (a draft's included), where the
    # plan says, else every layer of the rank.
    layers: int = 0


def block_math(plan: Plan) -> BlockMath | None:
    cap = plan.capacity
    if cap is None:
        return None
    layers = plan.per_rank.kv_layers or plan.per_rank.layers
    block_bytes: int | None = plan.per_rank.page_bytes * layers
    if not block_bytes or cap.kv_budget_bytes // block_bytes != cap.num_blocks:
        block_bytes = None
    simple_bpr = cap.blocks_per_request == math.ceil(cap.context_tokens / plan.block_size)
    simple_max = cap.blocks_per_request > 0 and cap.max_requests == (
        (cap.num_blocks - cap.reserved_blocks) // cap.blocks_per_request
    )
    return BlockMath(block_bytes, simple_bpr, simple_max, layers)


def engine_log_differs(plan: Plan) -> bool:
    """The engine's start-up log prints a concurrency other than the requests that fit."""
    cap = plan.capacity
    if cap is None or cap.engine_reported_concurrency is None:
        return False
    return math.floor(cap.engine_reported_concurrency) != cap.max_requests


@dataclass(frozen=True, slots=True)
class FormulaShown:
    """The bytes-per-token formula as the page shows it: the arithmetic (`code`, numbers and
    symbols only) and its remark in the page's language."""

    code: str
    remark: str | None = None


def formula_shown(plan: Plan, _: Callable[[str], str]) -> FormulaShown:
    """The core's formula split into its arithmetic and its English remark, which the page
    words itself (planner.core.plan's MLA remark, a hybrid's per-request state)."""
    formula = plan.kv_bytes_per_token_formula
    if formula.endswith(" " + MLA_FORMULA_REMARK):
        return FormulaShown(
            formula.removesuffix(" " + MLA_FORMULA_REMARK),
            _("MLA: one latent per layer and token, no ×2 and no head factor."),
        )
    if STATE_FORMULA_JOIN in formula and formula.endswith(STATE_FORMULA_END):
        per_token, state = formula.removesuffix(STATE_FORMULA_END).split(STATE_FORMULA_JOIN, 1)
        remark = _("per token; the state layers hold %(state)s per request.")
        return FormulaShown(per_token, remark % {"state": state})
    return FormulaShown(formula)


def symbolic_formula(plan: Plan) -> str | None:
    """`2 × L × Hkv × d × b` when the core's formula has that shape (uniform layers)."""
    formula = plan.kv_bytes_per_token_formula
    if formula.startswith("2 × ") and "+" not in formula:
        return "2 × L × Hkv × d × b"
    return None
