"""`recommend()`: engine settings that hold a workload, or the constraint that binds and the
nearest thing that would fit.

Every candidate (KV dtype × tensor-parallel size) is planned with `plan()` itself, so a
recommendation and the plan of its own flags cannot disagree. Per candidate: the pool's usable
blocks and each length class's block need (block rounding and the engine's admission rule
included) give the mix's expected and tail concurrency (`workload`); the tail figure sets how
many instances (data-parallel replicas) the target concurrency needs; the per-instance batch,
as whole requests of each class, must fit the pool (`workload_fits`) and, when a TPOT or
throughput target is given, meet it at the expected decode step (`bounds.expected`); a
bandwidth floor that already misses it rejects the candidate outright. Preference: the model's
own KV dtype before fp8, then the fewest GPUs, then the smallest TP.
"""

from __future__ import annotations

from planner.core.answer import NoteOut
from planner.core.engines import get_engine
from planner.core.errors import Message
from planner.core.flags import engine_dtype, model_name, render
from planner.core.inputs import Catalog
from planner.core.notes import Notes
from planner.core.recommend_schema import (
    Candidate,
    ClassNeed,
    EngineSettings,
    Recommendation,
    RecommendRequest,
    Suggestion,
    WorkloadCapacity,
)
from planner.core.recommend_search import (
    Eval,
    Planner,
    batch_counts,
    fits_with,
    mix_classes,
    most_permissive,
    search,
)
from planner.core.schema import MAX_PARALLEL

MAX_SUGGESTED_GPUS = 64


def _nearest(req: RecommendRequest, worst: Eval, limit: str, planner: Planner) -> list[Suggestion]:
    out: list[Suggestion] = []
    if req.kv_cache_dtype is None and not req.allow_fp8_kv and limit != "tpot":
        hit = fits_with(req, planner, allow_fp8_kv=True)
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
    if limit in ("concurrency", "tpot", "throughput") and worst.mix is not None:
        reach = worst.mix.tail_concurrency * max(1, req.gpu_count // worst.tp)
        if req.tpot_seconds is not None:
            reach = min(reach, _tpot_reach(req, worst, planner))
        # Offered only when it really fits (every constraint, as a fresh search finds it).
        if 0 < reach < req.concurrency and fits_with(req, planner, concurrency=reach):
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
        hit = fits_with(req, planner, gpu_count=count)
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


def _tpot_reach(req: RecommendRequest, ev: Eval, planner: Planner) -> int:
    """Largest total concurrency whose per-instance batch meets the TPOT target."""
    assert req.tpot_seconds is not None and ev.mix is not None
    lengths, shares, max_len = mix_classes(req)
    instances = max(1, req.gpu_count // ev.tp)

    def step(batch: int) -> float:
        counts = batch_counts(batch, shares, lengths)
        body = {
            **ev.body,
            "context_tokens": max_len,
            "requests": [
                {"context_tokens": c, "count": k} for c, k in zip(lengths, counts, strict=True) if k
            ],
        }
        bounds = planner(body).bounds
        if bounds is None:
            return 0.0
        return bounds.expected.tpot_seconds if bounds.expected else bounds.decode_step_seconds

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
    lengths, shares, max_len = mix_classes(req)
    gpu_label = req.gpu if isinstance(req.gpu, str) else req.gpu.name
    name = model_name(req.model)
    notes = Notes()
    planner = Planner(catalog)
    best, evals = search(req, planner)
    candidates = [
        Candidate(
            tensor_parallel_size=e.tp,
            kv_cache_dtype=e.dtype,
            instances=e.instances,
            tail_concurrency=e.mix.tail_concurrency if e.mix else 0,
            expected_concurrency=round(e.mix.expected_concurrency, 3) if e.mix else 0.0,
            decode_step_seconds=e.step_seconds,
            verdict="fits" if e.ok else f"{e.limit}: {e.detail.text if e.detail else ''}",
            expected_decode_step_seconds=e.expected_step_seconds,
            expected_tpot_seconds=e.expected_tpot_seconds,
        )
        for e in evals
    ]
    if best is None:
        worst = most_permissive(evals)
        limit = worst.limit or "concurrency"
        binding = Message.of(
            "recommend.binding", tp=worst.tp, dtype=worst.dtype, reason=worst.detail or ""
        )
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
            expected_decode_step_seconds=worst.expected_step_seconds,
            expected_tpot_seconds=worst.expected_tpot_seconds,
            binding_constraint=limit,
            binding_detail=binding.text,
            binding_detail_code=binding.code,
            binding_detail_params=binding.as_json(),
            nearest=_nearest(req, worst, limit, planner),
            plan_request=None,
            candidates=candidates,
            notes=notes.texts(),
            notes_detail=_details(notes),
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
        notes.add("recommend.kv_dtype_chosen", dtype=best.dtype)
    replicas = engine.replicas_note(best.instances, best.tp) if best.instances > 1 else None
    if replicas:
        notes.append(replicas)
    if name == "MODEL":
        notes.add("recommend.replace_model")
    notes.add(
        "recommend.max_num_seqs",
        batch=best.batch,
        quantile=req.tail_quantile,
        tail=best.mix.tail_concurrency,
        expected=best.mix.expected_concurrency,
        method=best.mix.method,
    )
    if req.tpot_seconds is not None or req.throughput_tokens_per_s is not None:
        notes.add("recommend.tpot_expected")
    tpot = best.expected_tpot_seconds
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
        expected_decode_step_seconds=best.expected_step_seconds,
        expected_tpot_seconds=tpot,
        throughput_tokens_per_s=req.concurrency / tpot if tpot else None,
        binding_constraint=None,
        binding_detail=None,
        nearest=[],
        plan_request=plan_request,
        candidates=candidates,
        notes=notes.texts(),
        notes_detail=_details(notes),
    )


def _details(notes: Notes) -> list[NoteOut]:
    return [NoteOut.model_validate(d) for d in notes.details()]


def _capacity(ev: Eval, lengths: list[int], shares: list[float]) -> WorkloadCapacity:
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
