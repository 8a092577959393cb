"""`recommend()`: engine settings that hold a workload, or the constraint that binds and the
nearest thing that would fit.

Every candidate (KV dtype × tensor-parallel size) is planned with `plan()` itself, so a
recommendation and the plan of its own flags cannot disagree. Per candidate: the pool's usable
blocks and each length class's block need (block rounding and the engine's admission rule
included) give the mix's expected and tail concurrency (`workload`); the tail figure sets how
many instances (data-parallel replicas) the target concurrency needs; the per-instance batch,
as whole requests of each class, must fit the pool (`workload_fits`) and, when a TPOT target
is given, the bandwidth floor of a decode step. Preference: the model's own KV dtype before
fp8, then the fewest GPUs, then the smallest TP.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from planner.core.engines import get_engine
from planner.core.errors import FieldError, PlanError
from planner.core.flags import engine_dtype, model_name, render
from planner.core.inputs import Catalog
from planner.core.plan import plan
from planner.core.recommend_schema import (
    Candidate,
    ClassNeed,
    EngineSettings,
    Recommendation,
    RecommendRequest,
    Suggestion,
    WorkloadCapacity,
)
from planner.core.schema import MAX_PARALLEL, Plan, PlanRequest
from planner.core.workload import MixCapacity, mix_capacity

MAX_SUGGESTED_GPUS = 64


@dataclass
class _Eval:
    tp: int
    dtype: str
    ok: bool = False
    limit: str | None = None  # binding constraint when not ok
    detail: str = ""
    instances: int = 0
    batch: int = 0
    counts: list[int] = field(default_factory=list)
    mix: MixCapacity | None = None
    needs: list[int] = field(default_factory=list)
    usable: int = 0
    longest: int = 0
    max_at_len: int = 0
    step_seconds: float | None = None
    block: int = 0
    model_dtype: str = "bf16"
    body: dict[str, Any] = field(default_factory=dict)


def _classes(req: RecommendRequest) -> tuple[list[int], list[float], int]:
    if req.context_mix:
        lengths = [c.context_tokens for c in req.context_mix]
        shares = [c.share for c in req.context_mix]
    else:
        assert req.max_model_len is not None
        lengths, shares = [req.max_model_len], [1.0]
    max_len = req.max_model_len or max(lengths)
    return lengths, shares, max_len


def _base(req: RecommendRequest, tp: int, dtype: str, util: float) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": req.model,
        "engine": req.engine,
        "gpu": req.gpu if isinstance(req.gpu, str) else req.gpu.model_dump(exclude_none=True),
        "tensor_parallel_size": tp,
        "kv_cache_dtype": dtype,
        "gpu_memory_utilization": util,
    }
    for key in ("block_size", "weights_bytes", "reserve_bytes", "max_num_batched_tokens"):
        value = getattr(req, key)
        if value is not None:
            body[key] = value
    return body


class _Planner:
    """`plan()` with a memo: the search and its what-ifs ask the same questions repeatedly."""

    def __init__(self, catalog: Catalog) -> None:
        self.memo: dict[str, Plan] = {}
        self.catalog = catalog

    def __call__(self, body: dict[str, Any]) -> Plan:
        key = json.dumps(body, sort_keys=True)
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = plan(PlanRequest.model_validate(body), catalog=self.catalog)
        return found


def _batch_counts(batch: int, shares: list[float], lengths: list[int]) -> list[int]:
    """A batch as whole requests of each class in the mix's proportions, summing to `batch`
    (largest remainders; ties to the class nearest the mean length, so the batch costs what
    the mix does on average — the tail figure already holds the margin above that)."""
    exact = [batch * p for p in shares]
    counts = [math.floor(x) for x in exact]
    mean = sum(p * c for p, c in zip(shares, lengths, strict=True))
    order = sorted(
        range(len(shares)), key=lambda i: (counts[i] - exact[i], abs(lengths[i] - mean), i)
    )
    for i in order[: batch - sum(counts)]:
        counts[i] += 1
    return counts


def _evaluate(req: RecommendRequest, tp: int, dtype: str, util: float, _plan: _Planner) -> _Eval:
    ev = _Eval(tp, dtype)
    lengths, shares, max_len = _classes(req)
    base = _base(req, tp, dtype, util)
    try:
        top = _plan({**base, "context_tokens": max_len})
    except FieldError as exc:
        if any(p.loc and p.loc[0] == "tensor_parallel_size" for p in exc.problems):
            ev.limit, ev.detail = "tensor_parallel_size", exc.problems[0].msg
            return ev
        raise
    cap = top.capacity
    assert cap is not None  # a GPU is always given
    ev.block, ev.model_dtype = top.block_size, top.model.dtype
    ev.usable = max(0, cap.num_blocks - cap.reserved_blocks)
    ev.longest, ev.max_at_len = cap.longest_context_tokens, cap.max_requests
    ev.body = base
    if cap.kv_budget_bytes == 0:
        ev.limit = "weights_exceed_memory"
        ev.detail = (
            f"weights and reserves leave no KV memory on {tp} GPU(s) ({cap.budget.derivation})"
        )
        return ev
    if cap.max_requests < 1:
        ev.limit = "max_model_len"
        ev.detail = (
            f"one request of max_model_len {max_len:,} does not fit; the longest that does is "
            f"{ev.longest:,} tokens"
        )
        return ev
    ev.needs = [
        cap.blocks_per_request
        if c == max_len
        else _plan({**base, "context_tokens": c}).capacity.blocks_per_request  # type: ignore[union-attr]
        for c in lengths
    ]
    ev.mix = mix_capacity(ev.usable, ev.needs, shares, req.tail_quantile)
    tail = ev.mix.tail_concurrency
    available = req.gpu_count // tp
    if tail < 1:
        ev.limit = "concurrency"
        ev.detail = "not even one request of the mix fits reliably"
        return ev
    first = math.ceil(req.concurrency / tail)
    if first > available:
        ev.limit = "concurrency"
        ev.detail = (
            f"{tail} requests fit per instance {req.tail_quantile:.0%} of the time; "
            f"{available} instance(s) of TP {tp} hold {tail * available}, short of "
            f"{req.concurrency}"
        )
        return ev

    def attempt(instances: int) -> bool:
        batch = math.ceil(req.concurrency / instances)
        counts = _batch_counts(batch, shares, lengths)
        result = _plan(
            {
                **base,
                "context_tokens": max_len,
                "requests": [
                    {"context_tokens": c, "count": k}
                    for c, k in zip(lengths, counts, strict=True)
                    if k
                ],
            }
        )
        rcap, bounds = result.capacity, result.bounds
        assert rcap is not None
        step = bounds.decode_step_seconds if bounds is not None else None
        ev.instances, ev.batch, ev.counts, ev.step_seconds = instances, batch, counts, step
        if not rcap.workload_fits:
            ev.limit = "concurrency"
            ev.detail = f"a batch of {batch} in the mix's proportions does not fit one instance"
            return False
        if req.tpot_seconds is not None and step is not None and step > req.tpot_seconds:
            ev.limit = "tpot"
            ev.detail = (
                f"the decode step's bandwidth floor at a batch of {batch} is {step * 1e3:.2f} ms, "
                f"above the {req.tpot_seconds * 1e3:.2f} ms TPOT target"
            )
            return False
        ev.ok, ev.limit, ev.detail = True, None, ""
        return True

    # More instances mean a smaller batch each, which fits and steps no worse: the smallest
    # count that works is found by bisection.
    if attempt(first) or not attempt(available):
        return ev
    lo, hi = first, available  # attempt(lo) fails, attempt(hi) works
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if attempt(mid):
            hi = mid
        else:
            lo = mid
    attempt(hi)
    return ev


def _tp_sizes(gpu_count: int) -> list[int]:
    out, t = [], 1
    while t <= gpu_count:
        out.append(t)
        t *= 2
    return out


def _search(req: RecommendRequest, planner: _Planner) -> tuple[_Eval | None, list[_Eval]]:
    engine = get_engine(req.engine)
    util = req.gpu_memory_utilization or engine.default_memory_utilization()
    dtypes = (
        [req.kv_cache_dtype]
        if req.kv_cache_dtype
        else (["auto", "fp8"] if req.allow_fp8_kv else ["auto"])
    )
    evals: list[_Eval] = []
    for dtype in dtypes:
        for tp in _tp_sizes(req.gpu_count):
            evals.append(_evaluate(req, tp, dtype, util, planner))
    feasible = [e for e in evals if e.ok]
    if not feasible:
        return None, evals
    best = min(feasible, key=lambda e: (dtypes.index(e.dtype), e.tp * e.instances, e.tp))
    return best, evals


def _most_permissive(evals: list[_Eval]) -> _Eval:
    valid = [e for e in evals if e.limit != "tensor_parallel_size"] or evals
    return valid[-1]


def _fits_with(req: RecommendRequest, planner: _Planner, **update: Any) -> _Eval | None:
    try:
        best, _ = _search(req.model_copy(update=update), planner)
    except PlanError:
        return None
    return best


def _nearest(
    req: RecommendRequest, worst: _Eval, limit: str, planner: _Planner
) -> list[Suggestion]:
    out: list[Suggestion] = []
    if req.kv_cache_dtype is None and not req.allow_fp8_kv and limit != "tpot":
        hit = _fits_with(req, planner, allow_fp8_kv=True)
        if hit is not None:
            out.append(
                Suggestion(
                    change="kv_cache_dtype fp8", detail=f"fits with an fp8 KV cache at TP {hit.tp}"
                )
            )
    if limit == "max_model_len" and worst.longest > 0:
        out.append(
            Suggestion(
                change=f"max_model_len {worst.longest}",
                detail=f"the longest context one request can hold on {worst.tp} GPU(s) with "
                f"{worst.dtype} KV is {worst.longest:,} tokens",
            )
        )
    if limit in ("concurrency", "tpot") and worst.mix is not None:
        reach = worst.mix.tail_concurrency * max(1, req.gpu_count // worst.tp)
        if req.tpot_seconds is not None:
            reach = min(reach, _tpot_reach(req, worst, planner))
        # Offered only when it really fits (every constraint, as a fresh search finds it).
        if 0 < reach < req.concurrency and _fits_with(req, planner, concurrency=reach):
            out.append(
                Suggestion(
                    change=f"concurrency {reach}",
                    detail=f"{reach} concurrent requests fit {req.tail_quantile:.0%} of the time"
                    + (" and meet the TPOT target" if req.tpot_seconds is not None else "")
                    + f" on {req.gpu_count} GPU(s)",
                )
            )
    count = req.gpu_count * 2
    while count <= min(MAX_PARALLEL, max(MAX_SUGGESTED_GPUS, req.gpu_count * 2)):
        hit = _fits_with(req, planner, gpu_count=count)
        if hit is not None:
            out.append(
                Suggestion(
                    change=f"gpu_count {count}",
                    detail=f"fits with TP {hit.tp} × {hit.instances} instance(s), {hit.dtype} KV",
                )
            )
            break
        count *= 2
    return out


def _tpot_reach(req: RecommendRequest, ev: _Eval, planner: _Planner) -> int:
    """Largest total concurrency whose per-instance batch meets the TPOT target."""
    assert req.tpot_seconds is not None and ev.mix is not None
    lengths, shares, max_len = _classes(req)
    instances = max(1, req.gpu_count // ev.tp)

    def step(batch: int) -> float:
        counts = _batch_counts(batch, shares, lengths)
        body = {
            **ev.body,
            "context_tokens": max_len,
            "requests": [
                {"context_tokens": c, "count": k} for c, k in zip(lengths, counts, strict=True) if k
            ],
        }
        bounds = planner(body).bounds
        return bounds.decode_step_seconds if bounds is not None else 0.0

    lo, hi = 0, ev.mix.tail_concurrency
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if step(mid) <= req.tpot_seconds:
            lo = mid
        else:
            hi = mid - 1
    return lo * instances


def recommend(req: RecommendRequest, *, catalog: Catalog) -> Recommendation:
    """Recommend engine settings. Raises `PlanError` subclasses naming a bad field."""
    engine = get_engine(req.engine)
    lengths, shares, max_len = _classes(req)
    gpu_label = req.gpu if isinstance(req.gpu, str) else req.gpu.name
    name = model_name(req.model)
    notes: list[str] = []
    planner = _Planner(catalog)
    best, evals = _search(req, planner)
    candidates = [
        Candidate(
            tensor_parallel_size=e.tp,
            kv_cache_dtype=e.dtype,
            instances=e.instances,
            tail_concurrency=e.mix.tail_concurrency if e.mix else 0,
            expected_concurrency=round(e.mix.expected_concurrency, 3) if e.mix else 0.0,
            decode_step_seconds=e.step_seconds,
            verdict="fits" if e.ok else f"{e.limit}: {e.detail}",
        )
        for e in evals
    ]
    if best is None:
        worst = _most_permissive(evals)
        limit = worst.limit or "concurrency"
        return Recommendation(
            feasible=False,
            engine=req.engine,
            model=name,
            gpu=gpu_label,
            gpu_count=req.gpu_count,
            instances=0,
            gpus_used=0,
            settings=None,
            command=None,
            capacity=_capacity(worst, lengths, shares) if worst.mix else None,
            decode_step_seconds=worst.step_seconds,
            tpot_seconds=req.tpot_seconds,
            binding_constraint=limit,
            binding_detail=f"with TP {worst.tp} and {worst.dtype} KV: {worst.detail}",
            nearest=_nearest(req, worst, limit, planner),
            plan_request=None,
            candidates=candidates,
            notes=notes,
        )
    assert best.mix is not None
    util = best.body["gpu_memory_utilization"]
    settings = EngineSettings(
        tensor_parallel_size=best.tp,
        max_model_len=max_len,
        max_num_seqs=best.batch,
        gpu_memory_utilization=util,
        kv_cache_dtype=engine_dtype(engine, best.dtype, best.model_dtype),
        block_size=best.block,
        max_num_batched_tokens=(
            req.max_num_batched_tokens if engine.reports_max_num_batched_tokens() else None
        ),
    )
    command, files = render(engine, name, settings, best.instances)
    plan_request = {
        **best.body,
        "context_tokens": max_len,
        "requests": [
            {"context_tokens": c, "count": k}
            for c, k in zip(lengths, best.counts, strict=True)
            if k
        ],
    }
    if best.dtype != "auto":
        notes.append(
            f"{best.dtype} KV cache chosen: the model's own dtype cannot hold the "
            "workload on these GPUs."
        )
    replicas = engine.replicas_note(best.instances, best.tp) if best.instances > 1 else None
    if replicas:
        notes.append(replicas)
    if name == "MODEL":
        notes.append("Replace MODEL with the checkpoint's name or path.")
    notes.append(
        f"max_num_seqs {best.batch} per instance keeps the batch within what the KV pool holds "
        f"{req.tail_quantile:.0%} of the time ({best.mix.tail_concurrency}; expected "
        f"{best.mix.expected_concurrency:.1f}, {best.mix.method} method)."
    )
    if req.tpot_seconds is not None:
        notes.append(
            "The TPOT check uses the decode step's memory-bandwidth floor (KV + weights "
            "read once per step): a lower bound, real steps are slower."
        )
    return Recommendation(
        feasible=True,
        engine=req.engine,
        model=name,
        gpu=gpu_label,
        gpu_count=req.gpu_count,
        instances=best.instances,
        gpus_used=best.tp * best.instances,
        settings=settings,
        command=command,
        extra_files=files,
        capacity=_capacity(best, lengths, shares),
        decode_step_seconds=best.step_seconds,
        tpot_seconds=req.tpot_seconds,
        binding_constraint=None,
        binding_detail=None,
        nearest=[],
        plan_request=plan_request,
        candidates=candidates,
        notes=notes,
    )


def _capacity(ev: _Eval, lengths: list[int], shares: list[float]) -> WorkloadCapacity:
    assert ev.mix is not None
    return WorkloadCapacity(
        usable_blocks=ev.usable,
        block_tokens=ev.block,
        classes=[
            ClassNeed(context_tokens=c, share=p, blocks_per_request=b)
            for c, p, b in zip(lengths, shares, ev.needs, strict=True)
        ],
        mean_blocks_per_request=round(ev.mix.mean_units, 6),
        fluid_concurrency=round(ev.mix.fluid_concurrency, 6),
        expected_concurrency=round(ev.mix.expected_concurrency, 6),
        tail_concurrency=ev.mix.tail_concurrency,
        tail_quantile=ev.mix.tail_quantile,
        method=ev.mix.method,
        max_requests_at_max_model_len=ev.max_at_len,
        longest_context_tokens=ev.longest,
    )


__all__ = ["recommend"]
