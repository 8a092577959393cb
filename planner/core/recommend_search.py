"""The candidates `recommend()` weighs: each KV dtype × tensor-parallel size planned with
`plan()` (memoised), the mix's concurrency on its pool, the instances and per-instance batch it
needs, and the preferred candidate that holds the workload."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from planner.core.engines import get_engine
from planner.core.errors import FieldError, Message, PlanError
from planner.core.inputs import Catalog
from planner.core.recommend_schema import RecommendRequest
from planner.core.schema import Plan
from planner.core.variants import Replanner
from planner.core.workload import MixCapacity, mix_capacity


@dataclass
class Eval:
    tp: int
    dtype: str
    ok: bool = False
    limit: str | None = None  # binding constraint when not ok
    detail: Message | None = None  # why not, when not ok
    instances: int = 0
    batch: int = 0
    counts: list[int] = field(default_factory=list)
    mix: MixCapacity | None = None
    needs: list[int] = field(default_factory=list)
    usable: int = 0
    longest: int = 0
    max_at_len: int = 0
    step_seconds: float | None = None  # the floor
    expected_step_seconds: float | None = None
    expected_tpot_seconds: float | None = None
    block: int = 0
    model_dtype: str = "bf16"
    body: dict[str, Any] = field(default_factory=dict)


def mix_classes(req: RecommendRequest) -> tuple[list[int], list[float], int]:
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
        # The search asks what memory holds; past the model's maximum length is reported by
        # the plan's note, not by refusing every candidate.
        "allow_long_max_model_len": True,
    }
    for key in ("block_size", "weights_bytes", "reserve_bytes", "max_num_batched_tokens"):
        value = getattr(req, key)
        if value is not None:
            body[key] = value
    return body


class Planner:
    """The search's plans: its candidates and what-ifs ask the same questions repeatedly, so
    they go through one memoised `Replanner`."""

    def __init__(self, catalog: Catalog) -> None:
        self.replan = Replanner(catalog)

    def __call__(self, body: dict[str, Any]) -> Plan:
        return self.replan(body)


def batch_counts(batch: int, shares: list[float], lengths: list[int]) -> list[int]:
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


def evaluate(req: RecommendRequest, tp: int, dtype: str, util: float, _plan: Planner) -> Eval:
    ev = Eval(tp, dtype)
    lengths, shares, max_len = mix_classes(req)
    base = _base(req, tp, dtype, util)
    try:
        top = _plan({**base, "context_tokens": max_len})
    except FieldError as exc:
        if any(p.loc and p.loc[0] == "tensor_parallel_size" for p in exc.problems):
            ev.limit, ev.detail = "tensor_parallel_size", exc.problems[0].message
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
        ev.detail = Message.of("recommend.no_kv_memory", tp=tp, derivation=cap.budget.derivation)
        return ev
    if cap.max_requests < 1:
        ev.limit = "max_model_len"
        ev.detail = Message.of("recommend.max_model_len", max_len=max_len, longest=ev.longest)
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
        ev.detail = Message.of("recommend.no_request_fits")
        return ev
    first = math.ceil(req.concurrency / tail)
    if first > available:
        ev.limit = "concurrency"
        ev.detail = Message.of(
            "recommend.instances_short",
            tail=tail,
            quantile=req.tail_quantile,
            available=available,
            tp=tp,
            held=tail * available,
            concurrency=req.concurrency,
        )
        return ev

    def attempt(instances: int) -> bool:
        batch = math.ceil(req.concurrency / instances)
        counts = batch_counts(batch, shares, lengths)
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
        expected = bounds.expected if bounds is not None else None
        ev.instances, ev.batch, ev.counts, ev.step_seconds = instances, batch, counts, step
        ev.expected_step_seconds = expected.decode_step_seconds if expected else None
        ev.expected_tpot_seconds = expected.tpot_seconds if expected else None
        if not rcap.workload_fits:
            ev.limit = "concurrency"
            ev.detail = Message.of("recommend.batch_does_not_fit", batch=batch)
            return False
        miss = _speed_miss(req, batch, step, ev.expected_tpot_seconds)
        if miss is not None:
            ev.limit, ev.detail = miss
            return False
        ev.ok, ev.limit, ev.detail = True, None, None
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


def _speed_miss(
    req: RecommendRequest, batch: int, floor: float | None, tpot: float | None
) -> tuple[str, Message] | None:
    """The TPOT or throughput target a batch misses: the floor rejects what no run can meet,
    the expected TPOT (fitted constants) what a real run would not."""
    tpot = tpot if tpot is not None else floor
    if floor is None or tpot is None:
        return None
    if req.tpot_seconds is not None:
        target_ms = req.tpot_seconds * 1e3
        if floor > req.tpot_seconds:
            return "tpot", Message.of(
                "recommend.tpot_floor", batch=batch, floor_ms=floor * 1e3, target_ms=target_ms
            )
        if tpot > req.tpot_seconds:
            return "tpot", Message.of(
                "recommend.tpot_expected",
                batch=batch,
                tpot_ms=tpot * 1e3,
                floor_ms=floor * 1e3,
                target_ms=target_ms,
            )
    want = req.throughput_tokens_per_s
    if want is not None:
        if req.concurrency / floor < want:
            return "throughput", Message.of(
                "recommend.throughput_floor",
                concurrency=req.concurrency,
                batch=batch,
                floor_ms=floor * 1e3,
                rate=req.concurrency / floor,
                want=want,
            )
        if req.concurrency / tpot < want:
            return "throughput", Message.of(
                "recommend.throughput_expected",
                concurrency=req.concurrency,
                batch=batch,
                tpot_ms=tpot * 1e3,
                rate=req.concurrency / tpot,
                want=want,
            )
    return None


def _tp_sizes(gpu_count: int) -> list[int]:
    out, t = [], 1
    while t <= gpu_count:
        out.append(t)
        t *= 2
    return out


def search(req: RecommendRequest, planner: Planner) -> tuple[Eval | None, list[Eval]]:
    engine = get_engine(req.engine)
    util = req.gpu_memory_utilization or engine.default_memory_utilization()
    # The engine's own FP8 spelling (SGLang takes fp8_e4m3, not fp8).
    fp8 = "fp8" if "fp8" in engine.kv_cache_dtype_names() else "fp8_e4m3"
    dtypes = (
        [req.kv_cache_dtype]
        if req.kv_cache_dtype
        else (["auto", fp8] if req.allow_fp8_kv else ["auto"])
    )
    evals: list[Eval] = []
    for dtype in dtypes:
        for tp in _tp_sizes(req.gpu_count):
            evals.append(evaluate(req, tp, dtype, util, planner))
    feasible = [e for e in evals if e.ok]
    if not feasible:
        return None, evals
    best = min(feasible, key=lambda e: (dtypes.index(e.dtype), e.tp * e.instances, e.tp))
    return best, evals


def most_permissive(evals: list[Eval]) -> Eval:
    valid = [e for e in evals if e.limit != "tensor_parallel_size"] or evals
    return valid[-1]


def fits_with(req: RecommendRequest, planner: Planner, **update: Any) -> Eval | None:
    try:
        best, _ = search(req.model_copy(update=update), planner)
    except PlanError:
        return None
    return best


__all__ = [
    "Eval",
    "Planner",
    "batch_counts",
    "evaluate",
    "fits_with",
    "mix_classes",
    "most_permissive",
    "search",
]
