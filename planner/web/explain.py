"""The explain page: `GET /explain` walks through why the KV cache is exact and what it saves,
with every number computed by the lab core (`planner.lab.reference`, `.ring`, `.counting`);
`POST /explain/lang` switches the language and keeps the chosen values.

The user picks P and T for the mask grid and the token count and capacity of the ring buffer
with a plain GET form (no JavaScript needed). A bad value is shown next to its field, with
status 200 as on the other pages, and that section falls back to the seed's example.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup

from planner.lab.counting import (
    CountRow,
    closed_form_cached,
    closed_form_no_cache,
    count_table,
    positions_processed,
)
from planner.lab.lab import COUNT_DIM, COUNT_LENGTHS
from planner.lab.reference import causal_mask, mask_rows, softmax_example
from planner.lab.ring import RingStep, ring_slots
from planner.web.form import FieldMessage, Gettext
from planner.web.i18n import Numbers, translations
from planner.web.page import language_of, remember_language, render_page, toggled_language

router = APIRouter(include_in_schema=False)


@dataclass(frozen=True, slots=True)
class Bound:
    default: int
    lo: int
    hi: int


# Defaults are the seeds' examples: P = 3 cached + a T = 2 chunk (seed 000), 5 tokens through a
# 4-slot ring (seed 000). Bounds keep the grid and the table readable on a phone.
BOUNDS: dict[str, Bound] = {
    "cached_tokens": Bound(3, 0, 16),
    "chunk_tokens": Bound(2, 1, 8),
    "ring_tokens": Bound(5, 1, 24),
    "ring_capacity": Bound(4, 1, 12),
}
# Seed 000's value vector for the one-row softmax (the core's example uses the same).
SOFTMAX_VALUES: tuple[int, ...] = (2, 4, 8)
# Seed 004 §01: a prompt [A, B, C, D], then E, F, G are predicted.
PROMPT_TOKENS = 4
NEW_TOKENS = 3
_MAX_DIGITS = 6


def labels(_: Gettext) -> dict[str, str]:
    return {
        "": _("Form"),
        "cached_tokens": _("Cached tokens P"),
        "chunk_tokens": _("Chunk tokens T"),
        "ring_tokens": _("Tokens written"),
        "ring_capacity": _("Ring capacity (slots)"),
    }


def parse(
    values: Mapping[str, str], _: Gettext
) -> tuple[dict[str, int], dict[str, list[FieldMessage]]]:
    """Each field's value (its default when empty or wrong) and the mistakes to show."""
    chosen: dict[str, int] = {}
    errors: dict[str, list[FieldMessage]] = {}
    for name, bound in BOUNDS.items():
        text = values.get(name, "").strip()
        chosen[name] = bound.default
        if not text:
            continue
        if text.isascii() and text.isdigit() and len(text) <= _MAX_DIGITS:
            value = int(text)
            if bound.lo <= value <= bound.hi:
                chosen[name] = value
                continue
        message = _("Enter a whole number from %(lo)s to %(hi)s.") % {
            "lo": bound.lo,
            "hi": bound.hi,
        }
        shown = _("Showing the example with %(value)s instead.") % {"value": bound.default}
        errors[name] = [FieldMessage(message + " " + shown)]
    return chosen, errors


# ---- the softmax of one row (seed 000) --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SoftmaxRow:
    key: int
    logit_label: str
    logit: float
    exp: int
    weight: Fraction
    weight_float: float
    value: int
    product: Fraction


@dataclass(frozen=True, slots=True)
class SoftmaxView:
    rows: tuple[SoftmaxRow, ...]
    total: int  # the sum of the exps: the common denominator
    output: Fraction
    output_float: float

    def over_total(self, x: Fraction) -> str:
        """`x` as a fraction over the sum of the exps, unreduced as the seed writes it: 2/6."""
        return f"{x * self.total}/{self.total}"


def softmax_view() -> SoftmaxView:
    ex = softmax_example()
    total = sum(ex.exp_exact, Fraction(0))
    if total.denominator != 1:
        raise ValueError("the worked example has integer exps")
    rows = []
    for j, (logit, e, w, wf, v) in enumerate(
        zip(
            ex.logits,
            ex.exp_exact,
            ex.weights_exact,
            ex.weights_float,
            SOFTMAX_VALUES,
            strict=True,
        )
    ):
        label = "0" if e == 1 else f"ln {e}"
        rows.append(SoftmaxRow(j, label, logit, int(e), w, wf, v, w * v))
    output = sum((r.product for r in rows), Fraction(0))
    if output != ex.output_exact:
        raise ValueError("values disagree with planner.lab.reference.softmax_example")
    return SoftmaxView(tuple(rows), int(total), output, ex.output_float)


# ---- the mask of a chunk after cached tokens (seed 000) ---------------------------------------


@dataclass(frozen=True, slots=True)
class MaskCell:
    sees: bool
    cached: bool  # a column of the P cached keys (not of the chunk)
    differs: bool  # the other alignment decides this cell the other way


@dataclass(frozen=True, slots=True)
class MaskGridRow:
    query_position: int
    correct: tuple[MaskCell, ...]
    wrong: tuple[MaskCell, ...]
    visible_correct: tuple[int, ...]
    visible_wrong: tuple[int, ...]

    @property
    def differs(self) -> bool:
        return self.visible_correct != self.visible_wrong


@dataclass(frozen=True, slots=True)
class MaskView:
    cached_tokens: int
    chunk_tokens: int
    rows: tuple[MaskGridRow, ...]

    @property
    def key_tokens(self) -> int:
        return self.cached_tokens + self.chunk_tokens

    @property
    def first_wrong(self) -> MaskGridRow | None:
        """The first query row the top-left mask changes; None when P = 0."""
        return next((r for r in self.rows if r.differs), None)


def mask_view(cached_tokens: int, chunk_tokens: int) -> MaskView:
    good = causal_mask(cached_tokens, chunk_tokens, "bottom_right")
    bad = causal_mask(cached_tokens, chunk_tokens, "top_left")
    rows = []
    for i, r in enumerate(mask_rows(cached_tokens, chunk_tokens)):

        def cells(mask: Any, other: Any, i: int = i) -> tuple[MaskCell, ...]:
            return tuple(
                MaskCell(bool(mask[i, j]), j < cached_tokens, bool(mask[i, j] != other[i, j]))
                for j in range(mask.shape[1])
            )

        rows.append(
            MaskGridRow(
                r.query_position,
                cells(good, bad),
                cells(bad, good),
                r.visible_correct,
                r.visible_wrong,
            )
        )
    return MaskView(cached_tokens, chunk_tokens, tuple(rows))


def key_span(columns: Sequence[int]) -> str:
    """Key columns as the seed names them: `K0`, `K0–K3`, or a list when not contiguous."""
    if not columns:
        return "—"
    if len(columns) == 1:
        return f"K{columns[0]}"
    if list(columns) == list(range(columns[0], columns[-1] + 1)):
        return f"K{columns[0]}–K{columns[-1]}"
    return ", ".join(f"K{c}" for c in columns)


# ---- the ring buffer (seed 000) ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RingView:
    tokens: int
    capacity: int
    steps: tuple[RingStep, ...]
    following: RingStep  # the write of the next token, position = tokens

    @property
    def last(self) -> RingStep:
        return self.steps[-1]


def ring_view(tokens: int, capacity: int) -> RingView:
    steps = ring_slots(tokens + 1, capacity)
    return RingView(tokens, capacity, steps[:-1], steps[-1])


def window_start(step: RingStep) -> int:
    """Oldest absolute position still in the cache after this write."""
    return step.position - step.cache_tokens + 1


# ---- prefill vs decode (seed 004 §01, §04) ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class PassRow:
    predicts: str
    no_cache: str  # the tokens this pass processes without a cache
    no_cache_count: int
    cached: str  # the new tokens this pass processes with a cache
    cached_count: int
    builds_cache: bool


@dataclass(frozen=True, slots=True)
class PassView:
    rows: tuple[PassRow, ...]

    @property
    def no_cache_total(self) -> int:
        return sum(r.no_cache_count for r in self.rows)

    @property
    def cached_total(self) -> int:
        return sum(r.cached_count for r in self.rows)

    def sum_text(self, counts: Sequence[int]) -> str:
        return "+".join(str(c) for c in counts)


def pass_view(prompt_tokens: int = PROMPT_TOKENS, new_tokens: int = NEW_TOKENS) -> PassView:
    letters = string.ascii_uppercase
    no_cache, cached = positions_processed(prompt_tokens, new_tokens)
    rows = []
    for i, (n, c) in enumerate(zip(no_cache, cached, strict=True)):
        # Without a cache a pass reads all n tokens so far; with one, only the last c are new.
        rows.append(
            PassRow(letters[n], " ".join(letters[:n]), n, " ".join(letters[n - c : n]), c, i == 0)
        )
    return PassView(tuple(rows))


# ---- multiplications counted (seed 003) -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CountView:
    d: int
    rows: tuple[CountRow, ...]

    def closed_forms(self, row: CountRow) -> tuple[tuple[int, int], tuple[int, int]]:
        n = row.context_tokens
        return closed_form_no_cache(n, self.d), closed_form_cached(n, self.d)

    @property
    def all_match(self) -> bool:
        return all(r.matches_closed_form and r.outputs_match for r in self.rows)


@cache
def count_view() -> CountView:
    # The same d and lengths as `kvplan lab`; counted once per process (a few ms of Python).
    return CountView(COUNT_DIM, count_table(COUNT_DIM, COUNT_LENGTHS))


# ---- the page ---------------------------------------------------------------------------------


def canonical_query(values: Mapping[str, str]) -> str:
    """The non-default, valid values, in form order: the URL the toggle comes back to."""
    chosen, errors = parse(values, lambda s: s)
    return urlencode(
        [
            (name, str(chosen[name]))
            for name, bound in BOUNDS.items()
            if name not in errors and chosen[name] != bound.default
        ]
    )


def render(values: Mapping[str, str], lang: str) -> HTMLResponse:
    _ = translations(lang).gettext
    chosen, errors = parse(values, _)
    context: dict[str, Any] = {
        "lang_form": "explain-form",
        "lang_action": "/explain/lang",
        "nav_current": "explain",
        "fmt": Numbers(lang),
        "values": values,
        "errors": errors,
        "labels": labels(_),
        "bounds": BOUNDS,
        "softmax": softmax_view(),
        "mask": mask_view(chosen["cached_tokens"], chosen["chunk_tokens"]),
        "key_span": key_span,
        "code": lambda text: Markup("<code>%s</code>") % text,
        "ring": ring_view(chosen["ring_tokens"], chosen["ring_capacity"]),
        "window_start": window_start,
        "passes": pass_view(),
        "counts": count_view(),
    }
    return render_page("explain.html", lang, context, cache_control="no-cache")


def _query_values(request: Request) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in BOUNDS:
        value = request.query_params.get(name)
        if value is not None:
            out[name] = value[:64]
    return out


@router.get("/explain", response_class=HTMLResponse)
async def explain_page(request: Request) -> Response:
    return render(_query_values(request), language_of(request))


@router.post("/explain/lang", response_class=HTMLResponse)
async def explain_language(request: Request) -> Response:
    """The language toggle: remember the choice, come back to the same values."""
    data = await request.form(max_files=0, max_fields=16)
    values = {n: v[:64] for n in BOUNDS if isinstance(v := data.get(n), str)}
    lang = toggled_language(request, data.get("lang"))
    query = canonical_query(values)
    response = RedirectResponse("/explain?" + query if query else "/explain", status_code=303)
    return remember_language(response, request, lang)
