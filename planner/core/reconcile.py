"""`reconcile()`: an engine's start-up log beside kvplan's recomputation of every figure in it.

The log is parsed (`logs`), its engine detected (and checked against the one claimed), the
model resolved (request, else the catalog entry the log names), settings resolved (request >
log > engine default, each with its source), then the engine's reconciler recomputes each
logged figure from the logged memory with kvplan's rules. Figures learned from the log (weights,
activation peak, non-torch memory, KV budget) come back as reserves and a ready plan request.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from planner.core.answer import NoteOut
from planner.core.engines import Engine, engine_class, engine_labels, log_engines
from planner.core.engines.readers import read_log, reads_inputs
from planner.core.engines.versions import parse_version, version_text
from planner.core.errors import FieldError, Message, PlanError
from planner.core.inputs import Catalog, ResolvedModel, resolve_draft
from planner.core.logs import Fact, ParsedLog
from planner.core.logs.parse import engine_hint, parse_log
from planner.core.model import ModelShape, shape_from_config
from planner.core.notes import Notes, Param
from planner.core.reconcile_common import Ctx, Resolved
from planner.core.reconcile_request import log_inputs, logged_flags
from planner.core.reconcile_schema import LoggedLine, ReconcileRequest, ReconcileResult, Summary
from planner.core.reconcile_settings import resolve_settings, settings_dtype
from planner.core.speculative import apply_speculation
from planner.core.units import KVDtype

# Lines of one kind checked (a log of many restarts repeats them; work and output stay bounded).
MAX_FACTS_PER_KIND = 32


def _examples() -> str:
    """Each log-reading engine's typical KV-cache line, for the no-line-recognised error."""
    classes = [engine_class(name) for name in log_engines()]
    return ", ".join(f"{cls.label} {cls.log_example}" for cls in classes if cls.log_example)


ENGINE_LABELS = engine_labels()


def _engine(claimed: str | None, log: ParsedLog, text: str) -> str:
    counts = log.engine_counts()
    detected = log.detected_engine
    if detected is None:
        hint = engine_hint(text)
        seen = f" (it mentions {ENGINE_LABELS[hint]})" if hint else ""
        raise FieldError(
            "log",
            "reconcile.no_startup_line",
            lines=log.lines_read,
            seen=seen,
            examples=_examples(),
        )
    if claimed is not None and counts.get(claimed, 0) == 0:
        raise FieldError(
            "engine",
            "reconcile.other_engine_log",
            detected_label=ENGINE_LABELS[detected],
            lines=counts[detected],
            claimed_label=ENGINE_LABELS[claimed],
            detected=detected,
        )
    return claimed or detected


def _model(
    req: ReconcileRequest, log: ParsedLog, catalog: Catalog
) -> tuple[ModelShape | None, str | dict[str, Any] | None, str | None, Message | str, Notes]:
    """(shape, reference for a plan, label, why there is no model, notes)."""
    notes = Notes()
    model = req.model
    if isinstance(model, dict):
        named = model.get("_name_or_path")
        label = (
            named
            if isinstance(named, str) and 0 < len(named) <= 200
            else str(model.get("model_type") or "config")
        )
        return shape_from_config(model), model, label, "", notes
    if isinstance(model, str):
        entry = catalog.model(model, None)
        return entry.shape, entry.shape.id, entry.shape.id, "", notes
    named = next((log.args[k] for k in ("model", "model_path") if k in log.args), None)
    if named:
        try:
            entry = catalog.model(named, None)
        except PlanError:
            why = Message.of("reason.log_model_not_in_catalog", named=named)
            return None, None, None, why, notes
        notes.add("reconcile.model_from_log", model=str(entry.shape.id))
        return entry.shape, entry.shape.id, entry.shape.id, "", notes
    return (
        None,
        None,
        None,
        Message.of("reason.no_model"),
        notes,
    )


def _plan_request(ctx: Ctx) -> dict[str, Any] | None:
    if ctx.model_ref is None:
        return None
    s = ctx.settings
    body: dict[str, Any] = {
        "model": ctx.model_ref,
        "engine": ctx.engine.name,
        "engine_version": ctx.engine.version_text,
        "kv_cache_dtype": s.dtype_name
        if s.dtype_name.lower() != "auto" or ctx.dtype is None
        else "auto",
        "block_size": s.block,
        "tensor_parallel_size": s.tp,
        "pipeline_parallel_size": s.pp,
    }
    if s.max_model_len is not None:
        body["context_tokens"] = s.max_model_len
    if ctx.engine.reports_max_num_batched_tokens():
        body["max_num_batched_tokens"] = s.max_num_batched_tokens
        if not s.hybrid:
            body["hybrid_kv_cache_manager"] = False
    res = ctx.reserves
    if (
        res is not None
        and res.weights_bytes is not None
        and res.reserve_bytes is not None
        and (s.gpu_id is not None and s.memory_fraction is not None)
    ):
        body.update(
            gpu=s.gpu_id,
            gpu_memory_utilization=s.memory_fraction,
            weights_bytes=res.weights_bytes,
            reserve_bytes=res.reserve_bytes,
        )
    elif res is not None and res.kv_budget_bytes is not None:
        body["kv_budget_bytes"] = res.kv_budget_bytes
    else:
        return None
    if s.speculative is not None:
        body["speculative_config"] = s.speculative
    body.update(ctx.plan_extra)
    if s.draft:
        ctx.notes.add("reconcile.plan_request_no_draft", draft=s.draft)
    return body


def _cap(facts: list[Fact]) -> tuple[list[Fact], int]:
    """At most MAX_FACTS_PER_KIND lines of each kind: bounded work and output, whatever the log."""
    seen: dict[str, int] = {}
    kept: list[Fact] = []
    for f in facts:
        seen[f.kind] = seen.get(f.kind, 0) + 1
        if seen[f.kind] <= MAX_FACTS_PER_KIND:
            kept.append(f)
    return kept, len(facts) - len(kept)


def _engine_at_version(name: str, log: ParsedLog, notes: Notes, given: str | None = None) -> Engine:
    """The engine at the release the request or the log names (its version line, else its
    line-number fingerprint); otherwise the newest verified release, said in a note."""
    cls = engine_class(name)
    if given is not None:
        return cls(cls.releases.resolve(given, label=cls.label))
    newest = cls(cls.releases.default)
    named = log.version
    how: tuple[str, dict[str, Param]] | None = None  # the note saying how it was inferred
    if named is None:
        inferred = newest.version_from_log([f for f in log.facts if f.engine == name])
        if inferred is not None:
            named, how = inferred[0], inferred[1:]
    if named is None:
        notes.add("reconcile.version_missing", engine=cls.label, version=newest.version_text)
        return newest
    parsed = parse_version(named)
    if parsed is None:
        notes.add(
            "reconcile.version_unreadable",
            named=named,
            engine=cls.label,
            version=newest.version_text,
        )
        return newest
    clamped = cls.releases.clamp(parsed)
    if clamped != parsed:
        notes.add(
            "reconcile.version_outside_rules",
            engine=cls.label,
            named=named,
            covered=cls.releases.describe(),
            version=version_text(clamped),
        )
    elif how is not None:
        code, params = how
        notes.add(code, engine=cls.label, version=version_text(clamped), **params)
    else:
        lines = newest.release_of_lines([f for f in log.facts if f.engine == name])
        found = parse_version(lines[0]) if lines else None
        if lines and found and found[:3] != parsed[:3]:
            notes.add(
                "reconcile.version_lines_differ",
                engine=cls.label,
                named=named,
                found=lines[0],
                source=lines[1],
            )
    return cls(clamped)


def _bind_state(
    engine: Engine,
    shape: ModelShape,
    dtype: KVDtype,
    settings: Resolved,
    req: ReconcileRequest,
    notes: Notes,
) -> tuple[ModelShape | None, Message | str]:
    """State layers sized as the engine sizes them, and the block size it then uses; a
    setup the engine's rules do not cover leaves the figures unrecomputed, with the reason."""
    model_dtype, _ = engine.model_dtype(shape, None)
    prefix = req.settings.enable_prefix_caching
    try:
        bound, block, more = engine.bind_state(
            shape,
            block_size=settings.block,
            kv=dtype,
            model_dtype=model_dtype,
            tp=settings.tp,
            pp=settings.pp,
            prefix_caching=engine.state_prefix_caching(prefix),
            max_model_len=settings.max_model_len or shape.max_position_embeddings or 1,
        )
    except FieldError as exc:
        return None, exc.problems[0].message if exc.problems else exc.message
    settings.block = block
    notes.extend(more)
    return bound, ""


def reconcile(req: ReconcileRequest, *, catalog: Catalog) -> ReconcileResult:
    """Reconcile one log. Raises `PlanError` subclasses naming the offending field."""
    log = parse_log(req.log)
    name = _engine(req.engine, log, req.log)
    shape, ref, label, why, notes = _model(req, log, catalog)
    try:
        engine = _engine_at_version(name, log, notes, req.settings.engine_version)
        flags = logged_flags(engine, log.args)
        if flags:  # the pools are recomputed, and planned, with the flags the server ran
            engine = engine.for_request(SimpleNamespace(**flags))
        settings = resolve_settings(engine, req.settings, log, shape, catalog)
        for flag, value in flags.items():
            settings.note(flag, value, "log")
        dtype = settings_dtype(settings.dtype_name, shape)
        if shape is not None:
            engine.validate_parallel(shape, settings.tp, settings.pp)
        spec = req.settings.speculative_config
        if spec is not None and shape is not None and dtype is not None:
            config = ref if isinstance(ref, dict) else catalog.model(str(ref), None).config
            sp, _ = resolve_draft(
                spec, engine, ResolvedModel(shape, config=config), catalog, settings.tp, dtype
            )
            shape = apply_speculation(shape, sp)
            settings.speculative = spec.model_dump(exclude_none=True)
            settings.note(
                "speculative_config",
                f"{sp.method}, {len(sp.draft_layers)} draft KV layer(s), "
                f"{sp.num_speculative_tokens} tokens",
                "request",
            )
    except FieldError as exc:
        loc = exc.problems[0].loc if exc.problems else ("settings",)
        if loc and loc[0] not in ("settings", "model"):
            raise FieldError.at(("settings", *loc), exc.problems[0]) from None
        raise
    if shape is not None and dtype is not None and shape.has_state:
        shape, why = _bind_state(engine, shape, dtype, settings, req, notes)
    facts = [f for f in log.facts if f.engine == engine.name]
    others = len(log.facts) - len(facts)
    if others:
        notes.add("reconcile.other_engine_lines", lines=others)
    facts, dropped = _cap(facts)
    if dropped:
        notes.add("reconcile.lines_capped", lines=dropped, cap=MAX_FACTS_PER_KIND)
    ctx = Ctx(
        engine=engine,
        log=log,
        facts=facts,
        shape=shape,
        model_ref=ref,
        model_label=label,
        no_model_reason=why,
        dtype=dtype,
        settings=settings,
        notes=notes,
    )
    ctx.plan_extra.update(flags)
    if req.settings.enable_prefix_caching is not None:
        ctx.plan_extra["enable_prefix_caching"] = req.settings.enable_prefix_caching
    if shape is not None and dtype is not None and reads_inputs(engine):
        ctx.inputs, ctx.inputs_reason = log_inputs(ctx, catalog)
    fmt = read_log(ctx)
    if log.lines_truncated:
        ctx.notes.add("reconcile.lines_truncated", lines=log.lines_truncated)
    statuses = [c.status for c in ctx.checks]
    summary = Summary(
        equal=statuses.count("equal"),
        consistent=statuses.count("consistent"),
        different=statuses.count("different"),
        explained=sum(1 for c in ctx.checks if c.status == "different" and c.reason),
        not_recomputable=statuses.count("not_recomputable"),
    )
    return ReconcileResult(
        engine=engine.name,
        engine_label=engine.label,
        log_format=fmt,
        engine_version=engine.version_text,
        lines_read=log.lines_read,
        lines_recognised=len(facts),
        model=label,
        settings=settings.used,
        lines=[
            LoggedLine(line=f.line_no, kind=f.kind, source=f.source, text=f.text) for f in facts
        ],
        checks=ctx.checks,
        summary=summary,
        reserves=ctx.reserves,
        plan_request=_plan_request(ctx),
        # Several lines may raise the same note; Notes keeps each once, in order.
        notes=ctx.notes.texts(),
        notes_detail=[NoteOut.model_validate(d) for d in ctx.notes.details()],
    )


__all__ = ["reconcile"]
