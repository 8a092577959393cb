"""`/lab` endpoints (mounted under /api/v1): the mask grid, ring slots and the count table.

Thin shells over `planner.lab.reference`, `.ring` and `.counting`. Inputs are bounded so every
request is a few milliseconds of NumPy or pure Python; out-of-range values are 422s from FastAPI's
validation, which the app maps to problem+json.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from planner.api.problems import problem_responses
from planner.lab.counting import closed_form_cached, closed_form_no_cache, count_table
from planner.lab.reference import causal_mask, mask_rows
from planner.lab.ring import ring_slots

MAX_MASK_TOKENS = 64
MAX_RING_TOKENS = 256
MAX_RING_CAPACITY = 64
MAX_COUNT_DIM = 16
MAX_COUNT_LENGTH = 64
MAX_COUNT_ROWS = 12
DEFAULT_COUNT_LENGTHS = [1, 2, 4, 8, 16, 32]

router = APIRouter(prefix="/lab", tags=["lab"])


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MaskRowOut(_Out):
    query_position: int = Field(description="Absolute position of this chunk query (P + i).")
    visible_correct: list[int] = Field(description="Key columns seen, bottom-right aligned.")
    visible_wrong: list[int] = Field(description="Key columns seen if wrongly top-left aligned.")
    differs: bool


class MaskOut(_Out):
    cached_tokens: int
    chunk_tokens: int
    key_tokens: int = Field(description="P + T: the mask is T × (P + T), not T × T.")
    rows: list[MaskRowOut]
    correct: list[list[bool]] = Field(description="Bottom-right mask, one row per chunk query.")
    wrong: list[list[bool]] = Field(description="Top-left mask: the silent bug.")
    first_wrong_position: int | None = Field(
        description="First query position the wrong mask changes; null when P = 0."
    )


class RingStepOut(_Out):
    position: int = Field(description="Absolute position (RoPE uses this; it keeps growing).")
    slot: int = Field(description="Physical slot written: position mod capacity.")
    cache_tokens: int = Field(description="Slots holding data after the write (<= capacity).")
    window_start: int = Field(description="Oldest position still visible.")
    slots: list[int | None] = Field(description="Position held by each slot; null if empty.")


class RingOut(_Out):
    tokens: int
    capacity: int
    steps: list[RingStepOut]


class CountRowOut(_Out):
    context_tokens: int = Field(description="n: positions in context, the new token included.")
    no_cache_projection: int
    no_cache_attention: int
    cache_projection: int
    cache_attention: int
    closed_form_no_cache_projection: int = Field(description="3·n·d²")
    closed_form_cache_projection: int = Field(description="3·d²")
    closed_form_attention: int = Field(description="2·n·d, with or without a cache")
    matches_closed_form: bool
    outputs_match: bool = Field(description="Cached and uncached outputs agree within 1e-9.")


class CountsOut(_Out):
    d: int
    rows: list[CountRowOut]


@router.get(
    "/mask",
    response_model=MaskOut,
    operation_id="lab_mask",
    summary="Causal mask of a chunk after cached tokens: correct vs top-left",
    responses=problem_responses(422),
)
def get_mask(
    cached_tokens: Annotated[int, Query(ge=0, le=MAX_MASK_TOKENS, description="P")] = 3,
    chunk_tokens: Annotated[int, Query(ge=1, le=MAX_MASK_TOKENS, description="T")] = 2,
) -> MaskOut:
    """Which key columns each query of a T-token chunk after P cached tokens may read."""
    rows = [
        MaskRowOut(
            query_position=r.query_position,
            visible_correct=list(r.visible_correct),
            visible_wrong=list(r.visible_wrong),
            differs=r.visible_correct != r.visible_wrong,
        )
        for r in mask_rows(cached_tokens, chunk_tokens)
    ]
    return MaskOut(
        cached_tokens=cached_tokens,
        chunk_tokens=chunk_tokens,
        key_tokens=cached_tokens + chunk_tokens,
        rows=rows,
        correct=causal_mask(cached_tokens, chunk_tokens, "bottom_right").tolist(),
        wrong=causal_mask(cached_tokens, chunk_tokens, "top_left").tolist(),
        first_wrong_position=next((r.query_position for r in rows if r.differs), None),
    )


@router.get(
    "/ring",
    response_model=RingOut,
    operation_id="lab_ring",
    summary="Ring-buffer slots of a sliding-window cache",
    responses=problem_responses(422),
)
def get_ring(
    tokens: Annotated[int, Query(ge=1, le=MAX_RING_TOKENS)] = 6,
    capacity: Annotated[int, Query(ge=1, le=MAX_RING_CAPACITY)] = 4,
) -> RingOut:
    """Slot, cache length and absolute position for each write into a sliding-window ring."""
    steps = [
        RingStepOut(
            position=s.position,
            slot=s.slot,
            cache_tokens=s.cache_tokens,
            window_start=s.position - s.cache_tokens + 1,
            slots=list(s.slots),
        )
        for s in ring_slots(tokens, capacity)
    ]
    return RingOut(tokens=tokens, capacity=capacity, steps=steps)


@router.get(
    "/counts",
    response_model=CountsOut,
    operation_id="lab_counts",
    summary="Multiplications per decode step, with and without a cache",
    responses=problem_responses(422),
)
def get_counts(
    d: Annotated[
        int, Query(ge=1, le=MAX_COUNT_DIM, description="Model dim (1 layer, 1 head).")
    ] = 8,
    lengths: Annotated[
        list[Annotated[int, Field(ge=1, le=MAX_COUNT_LENGTH)]],
        Query(
            min_length=1,
            max_length=MAX_COUNT_ROWS,
            description="Context lengths n, repeated: ?lengths=1&lengths=8.",
        ),
    ] = DEFAULT_COUNT_LENGTHS,
) -> CountsOut:
    """Multiplications counted for one decode step, without and with a KV cache."""
    rows = []
    for r in count_table(d, lengths):
        n = r.context_tokens
        rows.append(
            CountRowOut(
                context_tokens=n,
                no_cache_projection=r.no_cache_projection,
                no_cache_attention=r.no_cache_attention,
                cache_projection=r.cache_projection,
                cache_attention=r.cache_attention,
                closed_form_no_cache_projection=closed_form_no_cache(n, d)[0],
                closed_form_cache_projection=closed_form_cached(n, d)[0],
                closed_form_attention=closed_form_no_cache(n, d)[1],
                matches_closed_form=r.matches_closed_form,
                outputs_match=r.outputs_match,
            )
        )
    return CountsOut(d=d, rows=rows)
