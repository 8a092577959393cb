"""`plan()`: the one entry point the API, CLI and page share. PlanRequest in, Plan out.

A short pipeline over one resolved inputs object: resolve → layouts → budget → pool → capacity
→ bounds. Where each number comes from (one hop from here):
  inputs, defaults ... inputs.resolve             engine rules ....... engines.get_engine
  model shape ........ model.shape_from_config    layer kinds ........ specs (one class each)
  bytes per token .... specs.bytes_per_token      per-rank shapes .... parallel.rank_layouts
  window caps ........ LayerSpec.tokens_kept      paging ............. specs.request_paged_kv_bytes
  workload bytes ..... sizing.workload            KV budget .......... memory.kv_budget
  blocks, admission .. fit.capacity → Engine.build_pool (vLLM: engines.vllm.groups)
  decode floor ....... bounds.decode_bounds       Amdahl what-if ..... bounds.amdahl_speedup
  intensity .......... bounds.decode_attention_intensity
  prefill/decode work  bounds.positions_processed  prefill FLOPs ...... bounds.prefill_flops
"""

from __future__ import annotations

from planner.core import schema as s
from planner.core.bounds import decode_bounds, positions_processed
from planner.core.fit import capacity
from planner.core.inputs import CalibrationLike, Catalog, Inputs, resolve
from planner.core.memo import IdentityMemo, memo_by_identity
from planner.core.memory import kv_budget
from planner.core.model import ModelShape
from planner.core.notes import Note, Notes
from planner.core.parallel import rank_layouts
from planner.core.sizing import workload
from planner.core.specs import bytes_per_token
from planner.core.specs_state import StateSpec
from planner.core.speculative_schema import DraftOut
from planner.core.units import KVDtype


def plan(
    request: s.PlanRequest, *, catalog: Catalog, calibration: CalibrationLike | None = None
) -> s.Plan:
    """Plan one request. Raises `PlanError` subclasses naming the offending field."""
    return plan_inputs(resolve(request, catalog, calibration))


def plan_inputs(inp: Inputs) -> s.Plan:
    """The pipeline over resolved inputs (variants re-enter here with changed inputs)."""
    notes = Notes(inp.notes)
    settled = len(notes)  # the resolved notes: the same objects in every plan of a model
    layouts = rank_layouts(inp.shape, inp.engine, inp.tp, inp.pp)
    rows, totals, per_rank, more = workload(inp, layouts)
    notes.extend(more)
    budget, terms, more = kv_budget(inp)
    notes.extend(more)
    cap = pool = None
    if budget is not None:
        cap, pool, more = capacity(inp, budget, terms)
        notes.extend(more)
    bounds, more = decode_bounds(inp, layouts, cap, pool)
    notes.extend(more)
    generation = None
    ctx = inp.context_tokens
    if inp.request.output_tokens is not None:
        without, with_cache = positions_processed(ctx, inp.request.output_tokens)
        generation = s.GenerationOut(
            prompt_tokens=ctx,
            output_tokens=inp.request.output_tokens,
            positions_without_cache=without,
            positions_with_cache=with_cache,
            decode_steps=max(0, inp.request.output_tokens - 1),
        )
    per_token, formula = _per_token(inp.shape, inp.kv_dtype)
    engine = inp.engine
    # Each note's text formatted once, for both lists; a settled note's entry once per note.
    listed = [_note_out(n) if i < settled else _note_by_value(n) for i, n in enumerate(notes)]
    return s.Plan(
        engine=engine.name,
        engine_version=engine.version_text,
        async_scheduling=inp.sched.async_scheduling,
        dtype=inp.model_dtype,
        kv_cache_dtype=inp.kv_dtype.name,
        bytes_per_element=inp.kv_dtype.bytes_per_element,
        bits_per_element=inp.kv_dtype.bits,
        block_size=inp.block_size,
        tensor_parallel_size=inp.tp,
        pipeline_parallel_size=inp.pp,
        max_num_batched_tokens=(
            inp.sched.max_num_batched_tokens if engine.reports_max_num_batched_tokens() else None
        ),
        kv_bytes_per_token=per_token,
        kv_bytes_per_token_formula=formula,
        model=_model_section(inp),
        per_rank=per_rank,
        requests=rows,
        totals=totals,
        capacity=cap,
        bounds=bounds,
        generation=generation,
        notes=[n.text for n in listed],
        notes_detail=listed,
    )


def _note_entry(item: Note) -> s.NoteOut:
    """A note as the answer lists it."""
    return s.NoteOut.model_validate(
        {"code": item.code, "params": dict(item.params), "text": item.text}
    )


_note_out = memo_by_identity(4096)(_note_entry)  # kept per note object

# A note raised afresh (for the plan's own context or budget) kept per value: its code and its
# params in order, each with its type (1, 1.0 and True answer apart) and floats by their bits
# (0.0 and -0.0 too), so an entry is only ever reused for a note that formats the same.
_NOTES_BY_VALUE: IdentityMemo[s.NoteOut] = IdentityMemo(4096)
_BY_VALUE = object()  # the one object the memo above is pinned to


def _note_by_value(item: Note) -> s.NoteOut:
    key = (
        item.code,
        *[(k, v.__class__, v.hex() if isinstance(v, float) else v) for k, v in item.params.items()],
    )
    try:
        hit = _NOTES_BY_VALUE.get((_BY_VALUE,), key)
    except TypeError:  # a param that cannot be hashed: formatted afresh
        return _note_entry(item)
    return hit or _NOTES_BY_VALUE.put((_BY_VALUE,), key, _note_entry(item))


# The remark the MLA formula ends with, and the words between a hybrid's two sums.
MLA_FORMULA_REMARK = "(MLA: one latent per layer-token, no ×2, no head factor)"
STATE_FORMULA_JOIN = " per token; state layers hold "
STATE_FORMULA_END = " per request"


def _formula(shape: ModelShape, dtype: KVDtype, per_token: int) -> str:
    b = f"{dtype.bytes_per_element:g}"
    if shape.is_mla and len(shape.groups) == 1:
        return (
            f"{shape.groups[0].layers} × ({shape.kv_lora_rank} + "
            f"{shape.qk_rope_head_dim or 0}) × {b} B = {per_token:,} B {MLA_FORMULA_REMARK}"
        )
    first = shape.stack[0][0]
    if (
        not shape.is_mla
        and not shape.has_state
        and all(
            x.kv_heads == first.kv_heads
            and x.head_size == first.head_size
            and x.head_size_v == first.head_size_v
            for x, _ in shape.stack
        )
    ):
        n = sum(c for _, c in shape.stack)  # cache layers: shared ones none, drafts included
        if first.head_size == first.head_size_v:
            core = f"2 × {n} × {first.kv_heads} × {first.head_size} × {b} B"
        else:
            core = f"{n} × {first.kv_heads} × ({first.head_size} + {first.head_size_v}) × {b} B"
        if dtype.scale_bytes_per_token_head:
            core += f" + {n} × {first.kv_heads} × {dtype.scale_bytes_per_token_head} B scales"
        return f"{core} = {per_token:,} B"
    parts = [
        f"{g.layers} × {g.spec.bytes_per_token(dtype):,} B"
        for g in shape.groups
        if g.spec.grows_with_context
    ]
    state = [
        f"{g.layers} × {g.spec.state_bytes:,} B"
        for g in shape.groups
        if isinstance(g.spec, StateSpec)
    ]
    text = " + ".join(parts) + f" = {per_token:,} B"
    if state:
        text += STATE_FORMULA_JOIN + " + ".join(state) + STATE_FORMULA_END
    return text


@memo_by_identity(1024)
def _per_token(shape: ModelShape, dtype: KVDtype) -> tuple[int, str]:
    """Bytes per token and their formula, kept per shape and dtype (planner.core.memo)."""
    per_token = bytes_per_token(shape.stack, dtype)
    return per_token, _formula(shape, dtype, per_token)


# The answer's model section (frozen) per model, shape and what else it reads, without drafts.
_MODEL_OUT: IdentityMemo[s.ModelOut] = IdentityMemo(512)


def _model_section(inp: Inputs) -> s.ModelOut:
    if inp.speculation is not None:
        return _model_out(inp)
    pinned = (inp.model, inp.shape)
    rest = (inp.max_model_len, inp.weights_bytes, inp.request.weights_bytes is not None)
    return _MODEL_OUT.get(pinned, rest) or _MODEL_OUT.put(pinned, rest, _model_out(inp))


def _model_out(inp: Inputs) -> s.ModelOut:
    shape = inp.shape
    return s.ModelOut(
        id=shape.id,
        model_type=shape.model_type,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=1 if shape.is_mla else shape.num_key_value_heads,
        head_dim=shape.head_dim,
        max_position_embeddings=shape.max_position_embeddings,
        max_model_len=inp.max_model_len,
        dtype=shape.dtype,
        weights_bytes=inp.weights_bytes,
        weights_source=(
            "request" if inp.request.weights_bytes is not None else inp.model.weights_source
        ),
        num_parameters=inp.model.num_parameters,
        active_parameters=inp.model.active_parameters,
        groups=[
            s.GroupOut(
                kind=g.spec.kind,
                layers=g.layers,
                layer_indices=list(g.layer_indices),
                window_tokens=g.spec.window_tokens,
                kv_heads=g.spec.kv_heads,
                head_size_k=g.spec.head_size,
                head_size_v=g.spec.head_size_v,
                mixer=g.spec.mixer if isinstance(g.spec, StateSpec) else None,
                state_bytes_per_request=(
                    g.spec.state_bytes if isinstance(g.spec, StateSpec) else None
                ),
            )
            for g in shape.groups
        ],
        kv_shared_layers=[i for i, x in enumerate(shape.layers) if not x.owns_kv],
        draft=_draft_out(inp),
    )


def _draft_out(inp: Inputs) -> DraftOut | None:
    sp = inp.speculation
    if sp is None:
        return None
    return DraftOut(
        method=sp.method,
        model=sp.model_label,
        num_speculative_tokens=sp.num_speculative_tokens,
        kv_layers=len(sp.draft_layers),
        kv_bytes_per_token=sp.draft_bytes_per_token(inp.kv_dtype),
        lookahead_tokens=sp.reserved_tokens,
        extra_retained_tokens=sp.extra_retained_tokens,
    )


__all__ = ["CalibrationLike", "Catalog", "plan", "plan_inputs"]
