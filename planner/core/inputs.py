"""Resolve once: a PlanRequest, the catalog handed in, and a calibration become one frozen
`Inputs` object that every later step of `plan()` reads (and nothing re-decides).

The core never imports the catalog or the Hub: the front ends pass a `Catalog` (see
`planner.service`) that turns ids into `ResolvedModel` and `Gpu` objects (`resolved`).

What the engine settles for a catalog model (dtypes, refusals, bound layers, block, scheduling,
window policy, their notes) depends on the model, the engine and a few settings (`_Ask`), never on
the context or workload: it is kept (`_SETTLED`, planner.core.memo), so a plan of a catalog model
resolves only its context, workload and the request's own checks, in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, NamedTuple

from planner.core import schema as s
from planner.core.calibration import CalibrationLike
from planner.core.context_limit import long_context_refusal
from planner.core.engines import Engine, Scheduling, get_engine
from planner.core.engines.kv_checkpoint import checkpoint_kv_dtype
from planner.core.errors import FieldError, ModelConfigError, UnknownIdError
from planner.core.hardware import Gpu
from planner.core.memo import IdentityMemo
from planner.core.model import ModelShape, with_windows
from planner.core.notes import Note, note
from planner.core.prefix import one_prefix, prefix_reusers
from planner.core.resolved import (
    Catalog,
    ResolvedModel,
    model_from_config,
    resolve_draft,
    resolve_gpu,
    resolve_model_of,
    served_model,
)
from planner.core.sharing import layer_form_notes
from planner.core.specs import WindowPolicy
from planner.core.speculative import Speculation, apply_speculation
from planner.core.units import DTYPE_NAMES as KV_DTYPE_NAMES
from planner.core.units import KVDtype, kv_dtype

QUANT_FIELD = ("model", "quantization_config")


@dataclass(frozen=True, slots=True)
class Inputs:
    """Everything `plan()` decides before it computes, resolved once."""

    request: s.PlanRequest
    engine: Engine
    model: ResolvedModel
    shape: ModelShape  # the model's shape, with explicit windows applied
    gpu: Gpu | None
    model_dtype: str
    kv_dtype: KVDtype
    block_size: int
    sched: Scheduling
    policy: WindowPolicy
    tp: int
    pp: int
    context_tokens: int
    max_model_len: int | None
    mixes: tuple[s.RequestMix, ...]
    shared_prefix_tokens: tuple[int, ...]  # per mix: prefix tokens the engine stores once
    prefix_reusers: tuple[int, ...]  # per mix: requests reusing a prefix held (prefix.py)
    prefix_caching: bool
    weights_bytes: int | None  # whole model
    calibration: CalibrationLike | None
    notes: tuple[Note, ...]
    speculation: Speculation | None = None

    @property
    def workload_given(self) -> bool:
        return bool(self.request.requests)


def _context(request: s.PlanRequest, max_model_len: int | None) -> int:
    if request.context_tokens is not None:
        return request.context_tokens
    if request.requests:
        return max(r.context_tokens for r in request.requests)
    if max_model_len is not None:
        return min(max_model_len, s.MAX_TOKENS)
    raise FieldError(
        "context_tokens",
        "input.context_needed",
    )


def _kv_dtype(
    engine: Engine, asked_kv: str, asked_dtype: str | None, shape: ModelShape, model_dtype: str
) -> tuple[KVDtype, list[Note]]:
    explicit = asked_kv.strip().lower() != "auto"
    d, declared = shape.kv_declared, checkpoint_kv_dtype(engine, shape, explicit)
    if declared is not None and d is not None:
        said = {"engine": engine.label, "declared": d.text, "asked": asked_kv}
        if declared not in KV_DTYPE_NAMES:  # nvfp4, or a scheme the engine does not load
            raise ModelConfigError(QUANT_FIELD, "model.checkpoint_kv_unmodelled", **said)
        code = "dtype.kv_checkpoint_overrides" if explicit else "dtype.kv_from_checkpoint"
        return kv_dtype(declared), [note(code, dtype=declared, **said)]
    if explicit:
        return kv_dtype(asked_kv), []
    notes: list[Note] = []
    if not shape.dtype_from_config and asked_dtype in (None, "auto"):
        notes.append(note("dtype.auto_assumed_bf16"))
    return kv_dtype(model_dtype), notes


def _shared_prefix(prefix: int, block: int, engine: Engine, enabled: bool) -> int:
    """Tokens of a shared prefix the engine stores once (block engines: whole blocks only)."""
    if not enabled or engine.prefix_granularity == "none":
        return 0
    if engine.prefix_granularity == "block":
        return prefix // block * block
    return prefix


def _prefix_notes(engine: Engine, enabled: bool, block: int) -> Note:
    if engine.prefix_granularity == "none":
        return note("prefix.none")
    if not enabled:
        return note("prefix.off")
    if engine.prefix_granularity == "block":
        return note("prefix.blocks", engine=engine.label, block=block)
    return note("prefix.tokens", engine=engine.label)


class _Ask(NamedTuple):
    """What `_settle` reads of a request: with the engine, the catalog and the catalog's model,
    all that decides its answer (the memo's key)."""

    dtype: str | None
    kv_cache_dtype: str
    tp: int
    pp: int
    context_length: int | None
    allow_long: bool
    gpu: str | s.GpuSpec | None
    async_scheduling: bool | None
    enable_prefix_caching: bool | None
    block_size: int | None
    max_num_batched_tokens: int | None
    hybrid_kv_cache_manager: bool


@dataclass(frozen=True, slots=True)
class _Settled:
    """The engine's settings for a model: all of `Inputs` that its context does not change."""

    engine: Engine
    model: ResolvedModel
    shape: ModelShape
    gpu: Gpu | None
    model_dtype: str
    kv: KVDtype
    block: int
    sched: Scheduling
    policy: WindowPolicy
    max_len: int | None
    prefix_on: bool
    notes: tuple[Note, ...]
    speculation: Speculation | None
    keep: bool  # whether nothing but the `_Ask` decided it (no draft, state layers, windows)


class _Checks:
    """The request's own refusals (its context, beyond the model's length, its calibration id),
    run where `resolve` checks them: inline while settling, in the same order when settled."""

    __slots__ = ("calibration", "ctx", "engine", "request", "too_long")

    def __init__(self, request: s.PlanRequest, engine: Engine, calibration: Any) -> None:
        self.request, self.engine, self.calibration = request, engine, calibration
        self.ctx = 0
        self.too_long: FieldError | None = None

    def context(self, max_len: int | None) -> None:
        self.ctx = _context(self.request, max_len)
        engine = self.engine
        self.too_long = long_context_refusal(
            self.request, engine.label, engine.long_context_override, self.ctx, max_len
        )

    def over_validation(self, exc: FieldError) -> FieldError:
        """The refusal to raise where the engine's validation refused `exc`."""
        # vLLM's ModelConfig checks max_model_len after the model dtype, before the rest.
        dtype_first = isinstance(exc, ModelConfigError) or exc.problems[0].field == "dtype"
        if self.too_long is None or not self.engine.context_checked_early or dtype_first:
            return exc
        return self.too_long

    def validated(self) -> None:
        if self.too_long is not None and self.engine.context_checked_early:
            raise self.too_long

    def calibration_known(self) -> None:
        request, calibration = self.request, self.calibration
        if request.calibration_id is not None and (
            calibration is None or str(calibration.id) != request.calibration_id
        ):
            raise UnknownIdError(
                "calibration_id",
                "input.unknown_calibration",
                calibration_id=request.calibration_id,
            )

    def settled(self) -> None:
        if self.too_long is not None:
            raise self.too_long

    def replay(self, max_len: int | None) -> None:
        """All of them in order, for settings settled before (which raised nothing)."""
        self.context(max_len)
        self.validated()
        self.calibration_known()
        self.settled()


@lru_cache(maxsize=4096)
def _one_request(ctx: int) -> s.RequestMix:
    """The workload of a plan that names none: one request of its context (frozen, kept)."""
    return s.RequestMix(context_tokens=ctx)


# Settled engine settings per (catalog, model, engine, `_Ask`): a catalog keeps one model object
# per id, so a plan of a catalog model resolves only its context and workload.
_SETTLED: IdentityMemo[_Settled] = IdentityMemo(512)


def resolve(
    request: s.PlanRequest, catalog: Catalog, calibration: CalibrationLike | None = None
) -> Inputs:
    """The request resolved against its engine, model, GPU and calibration. Raises
    `PlanError` subclasses naming the offending field."""
    engine = get_engine(request.engine, request.engine_version).for_request(request)
    model = resolve_model_of(request, catalog)
    r = request
    ask = _Ask(
        r.dtype, r.kv_cache_dtype, r.tensor_parallel_size, r.pipeline_parallel_size,
        r.context_length, r.allow_long_max_model_len, r.gpu, r.async_scheduling,
        r.enable_prefix_caching, r.block_size, r.max_num_batched_tokens,
        r.hybrid_kv_cache_manager,
    )  # fmt: skip
    checks = _Checks(request, engine, calibration)
    # A pasted config is a new model each time; drafts and explicit windows read more of it.
    keepable = (
        isinstance(r.model, str) and r.speculative_config is None and r.max_attention_window is None
    )
    pinned, key = (catalog, model), (engine, ask)
    st = _SETTLED.get(pinned, key) if keepable else None
    if st is None:
        st = _settle(engine, model, catalog, ask, checks)
        if keepable and st.keep:
            _SETTLED.put(pinned, key, st)
    else:
        checks.replay(st.max_len)
    ctx, max_len, engine, block, prefix_on = (
        checks.ctx, st.max_len, st.engine, st.block, st.prefix_on
    )  # fmt: skip
    notes = list(st.notes)
    if max_len and ctx > max_len:
        notes.append(note("context.beyond_max_position", ctx=ctx, max_len=max_len))
    mixes = tuple(request.requests or [_one_request(ctx)])
    mixes, across = one_prefix(mixes, request.shared_prefix_tokens)
    shared = tuple(_shared_prefix(m.prefix_tokens, block, engine, prefix_on) for m in mixes)
    if any(m.prefix_tokens for m in mixes):
        notes.append(_prefix_notes(engine, prefix_on, block))
    model = st.model
    weights = request.weights_bytes if request.weights_bytes is not None else model.weights_bytes
    return Inputs(
        request=request,
        engine=engine,
        model=model,
        shape=st.shape,
        gpu=st.gpu,
        model_dtype=st.model_dtype,
        kv_dtype=st.kv,
        block_size=block,
        sched=st.sched,
        policy=st.policy,
        tp=ask.tp,
        pp=ask.pp,
        context_tokens=ctx,
        max_model_len=max_len,
        mixes=mixes,
        shared_prefix_tokens=shared,
        prefix_reusers=prefix_reusers(mixes, shared, across=across),
        prefix_caching=prefix_on,
        weights_bytes=weights,
        calibration=calibration,
        notes=tuple(notes),
        speculation=st.speculation,
    )


def _settle(
    engine: Engine, model: ResolvedModel, catalog: Catalog, ask: _Ask, checks: _Checks
) -> _Settled:
    """The engine's rules applied to the model in the engine's order, `checks` at their places.
    Reads the request itself (`checks.request`) only for drafts, state layers and windows."""
    shape = model.shape
    notes: list[Note] = list(model.notes)
    tp, pp = ask.tp, ask.pp
    model_dtype, dtype_notes = engine.model_dtype(shape, ask.dtype)
    model, more = served_model(model, model_dtype)  # weights in the dtype served
    dtype_notes += more
    kv, more = _kv_dtype(engine, ask.kv_cache_dtype, ask.dtype, shape, model_dtype)
    dtype_notes += more
    explicit_kv = ask.kv_cache_dtype.strip().lower() != "auto"
    max_len = engine.max_model_len(shape)
    if ask.context_length is not None:
        max_len = engine.context_length(shape, ask.context_length, ask.allow_long)
    checks.context(max_len)
    try:
        engine.validate(shape, tp, pp, kv, model_dtype, explicit_kv)
    except FieldError as exc:
        refusal = checks.over_validation(exc)
        if refusal is exc:
            raise
        raise refusal from None
    checks.validated()
    shape = engine.bind_layers(shape, kv, model_dtype)  # the draft copies these layers too
    model = replace(model, shape=shape)
    notes.extend(layer_form_notes(shape))
    request = checks.request
    speculation = None
    if request.speculative_config is not None:
        speculation, more = resolve_draft(
            request.speculative_config, engine, model, catalog, tp, kv, model_dtype
        )
        notes.extend(more)
        shape = apply_speculation(shape, speculation)
    gpu = resolve_gpu(ask.gpu, catalog)
    if gpu is not None:
        engine.check_gpu(shape, gpu)
    checks.calibration_known()
    notes.extend(engine.rule_notes())
    notes.extend(dtype_notes)
    if kv.note_code:
        notes.append(note(kv.note_code))

    if ask.async_scheduling is not None and not engine.takes_async_scheduling:
        raise FieldError("async_scheduling", "input.async_scheduling_not_vllm", label=engine.label)
    prefix_on = (
        ask.enable_prefix_caching
        if ask.enable_prefix_caching is not None
        else engine.prefix_caching_default
    )
    block, block_notes = engine.block_size(ask.block_size, shape, kv)
    notes.extend(block_notes)
    block, page_notes = engine.page_on_gpu(block, ask.block_size, shape, gpu)
    notes.extend(page_notes)
    state = shape.has_state
    if state:  # sized once dtype, TP and cache mode are known (vLLM raises the block)
        prefix_on = engine.state_prefix_caching(ask.enable_prefix_caching)
        shape, block, state_notes = engine.bind_state(
            shape, block_size=block, kv=kv, model_dtype=model_dtype, tp=tp, pp=pp,
            prefix_caching=prefix_on, max_model_len=checks.ctx,
            num_spec=speculation.num_speculative_tokens if speculation is not None else 0,
            async_scheduling=ask.async_scheduling,
        )  # fmt: skip
        notes.extend(state_notes)
    sched = engine.scheduling(
        ask.max_num_batched_tokens, ask.async_scheduling, gpu, pp, shape,
        speculation.method if speculation is not None else None,
    )  # fmt: skip
    if speculation is not None and speculation.reserved_tokens:
        sched = replace(sched, reserved_tokens=speculation.reserved_tokens)

    explicit_windows = request.max_attention_window is not None
    if explicit_windows:
        if not engine.takes_max_attention_window:
            raise FieldError(
                "max_attention_window", "input.max_attention_window_not_trtllm", label=engine.label
            )
        # The list (repeated over the layers) decides which layers keep a cyclic window;
        # max_seq_len is the longest request planned here.
        assert request.max_attention_window is not None
        longest_planned = max(
            [request.context_tokens or 0] + [m.context_tokens for m in request.requests or []]
        )
        shape = with_windows(
            shape,
            request.max_attention_window,
            longest_planned or shape.max_position_embeddings or s.MAX_TOKENS,
        )
    policy = engine.window_policy(
        shape, hybrid_manager=ask.hybrid_kv_cache_manager, explicit_windows=explicit_windows
    )
    if shape.has_window:
        notes.extend(engine.window_notes(policy, sched, shape, ask.hybrid_kv_cache_manager))
    checks.settled()
    return _Settled(
        engine, model, shape, gpu, model_dtype, kv, block, sched, policy, max_len, prefix_on,
        tuple(notes), speculation, keep=speculation is None and not state and not explicit_windows,
    )  # fmt: skip


__all__ = [
    "CalibrationLike",
    "Catalog",
    "Inputs",
    "ResolvedModel",
    "model_from_config",
    "resolve",
    "resolve_draft",
    "resolve_gpu",
    "resolve_model_of",
]
