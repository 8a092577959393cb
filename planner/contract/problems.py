"""RFC 9457 problem details: the one error shape of the API, the page and the CLI.

Plain Pydantic (no FastAPI), so `planner.client` and the CLI import it without the server stack.
`type`, `title`, `status`, `detail`, and `errors[]`, each with `loc`, `field` and `msg` (and, for
a JSON syntax error, `line` and `column`). A planner error's item also carries `code` and
`params`: `msg` is the English template of `code` (planner.core.errors) formatted with `params`,
so a client can word it in its own language.
"""

from __future__ import annotations

import http
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from planner.core.errors import ERROR_TEMPLATES, PlanError, dotted

PROBLEM_MEDIA_TYPE = "application/problem+json"


class ProblemError(BaseModel):
    """One offending input: `loc` is the path into the request, `field` the same path dotted."""

    model_config = ConfigDict(frozen=True)

    loc: list[str | int]
    field: str
    msg: str
    line: int | None = Field(default=None, description="JSON syntax errors: 1-based line.")
    column: int | None = Field(default=None, description="JSON syntax errors: 1-based column.")
    code: str | None = Field(
        default=None,
        description="Planner errors: the stable code of `msg` (its English template).",
        examples=["engine.tp_divides_heads"],
    )
    params: dict[str, Any] | None = Field(
        default=None,
        description=(
            "Planner errors: the values `msg` is formatted from; a nested reason is an object "
            "with its own `code` and `params`."
        ),
    )


class Problem(BaseModel):
    """RFC 9457 problem details, plus `errors` listing each offending field."""

    model_config = ConfigDict(frozen=True, extra="allow")

    type: str = Field(description="URI reference naming the kind of problem; about:blank if none.")
    title: str
    status: int
    detail: str
    instance: str | None = None
    errors: list[ProblemError] = Field(default_factory=list)
    suggestions: list[str] | None = Field(
        default=None, description="Unknown ids: the closest known ids, closest first."
    )


def problem_type(slug: str) -> str:
    """Our problem types are URNs: stable names that promise no page behind them."""
    return f"urn:kvplan:problem:{slug}"


def field_of(loc: Sequence[str | int]) -> str:
    """`("requests", 3, "count")` → `requests[3].count` (same rule as the CLI's errors)."""
    return dotted(tuple(loc))


def field_error(loc: Sequence[str | int], msg: str) -> ProblemError:
    return ProblemError(loc=list(loc), field=field_of(loc), msg=msg)


def make_problem(
    status: int,
    detail: str,
    *,
    title: str | None = None,
    slug: str | None = None,
    errors: Iterable[ProblemError] = (),
) -> Problem:
    """A problem; without `slug` the type is about:blank and the title the HTTP phrase.

    A 4xx always carries at least one `errors[]` entry: without one given, the request as a
    whole (`loc: ["request"]`) with the detail as its message.
    """
    phrase = http.HTTPStatus(status).phrase
    items = list(errors)
    if not items and 400 <= status < 500:
        items = [ProblemError(loc=["request"], field="request", msg=detail)]
    return Problem(
        type=problem_type(slug) if slug else "about:blank",
        title=title or phrase,
        status=status,
        detail=detail,
        errors=items,
    )


class ProblemException(Exception):
    """Raise anywhere in a request (or a CLI command) to answer with this problem."""

    def __init__(self, problem: Problem, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(problem.detail)
        self.problem = problem
        self.headers = dict(headers or {})


_NO_NODE = object()


def _strip_union_tags(loc: Sequence[str | int], error_type: str, body: Any) -> list[str | int]:
    """Drop the union-member labels pydantic puts in `loc` (`model.str`, `gpu.GpuSpec.name`).

    Walks `loc` through the request body: a string part that is not a key of the object at that
    point is a label, unless it is the last part of a `missing` error (a required key absent).
    """
    out: list[str | int] = []
    node: Any = body
    for i, part in enumerate(loc):
        is_last = i == len(loc) - 1
        if isinstance(part, int):
            out.append(part)
            in_list = isinstance(node, list) and 0 <= part < len(node)
            node = node[part] if in_list else _NO_NODE
        elif isinstance(node, dict) and part in node:
            out.append(part)
            node = node[part]
        elif isinstance(node, dict) and is_last and error_type == "missing":
            out.append(part)
        elif node is _NO_NODE:
            out.append(part)
        # else: a union label; the body has no such key here
    return out


# A model validator's error has the model's own location; these name the field it checks, so
# `errors[]` points at the input to change rather than at the whole object (`field: ""`).
_VALIDATOR_FIELDS = (("model config has more than", "model"),)


def _validator_field(loc: list[str | int], msg: str) -> list[str | int]:
    for prefix, field in _VALIDATOR_FIELDS:
        if msg.startswith(prefix):
            return [*loc, field]
    return loc


def errors_from_pydantic(
    errors: Iterable[Mapping[str, Any]], body: Any = _NO_NODE
) -> list[ProblemError]:
    """Pydantic error dicts → `errors[]`, never echoing the input (it may hold secrets).

    With the parsed `body`, union labels are dropped from `loc` and the alternatives' messages
    for one field are merged ("a valid string, or a valid dictionary").
    """
    merged: dict[tuple[str | int, ...], list[str]] = {}
    coded: dict[tuple[str | int, ...], tuple[str, dict[str, Any]]] = {}
    for error in errors:
        raw_loc = [part if isinstance(part, int) else str(part) for part in error.get("loc", ())]
        error_type = str(error.get("type", ""))
        loc = raw_loc if body is _NO_NODE else _strip_union_tags(raw_loc, error_type, body)
        msg = str(error.get("msg", "invalid value"))
        if error_type == "extra_forbidden":
            msg = "unknown field; remove it (see the request schema for the accepted fields)"
        elif error_type == "value_error" or error_type in ERROR_TEMPLATES:
            # Pydantic prefixes a validator's own message with "Value error, ": drop the noise.
            msg = msg.removeprefix("Value error, ")
            loc = _validator_field(loc, msg)
        messages = merged.setdefault(tuple(loc), [])
        if msg not in messages:
            messages.append(msg)
        if error_type in ERROR_TEMPLATES:  # a validator's registered message (errors.invalid)
            coded[tuple(loc)] = (error_type, dict(error.get("ctx") or {}))
    if body is not _NO_NODE:
        # A union alternative that got further ("gpu.memory_bytes: Field required") says more
        # than the one that failed at once ("gpu: Input should be a valid string").
        deeper = {loc[:n] for loc in merged for n in range(len(loc))}
        merged = {loc: m for loc, m in merged.items() if loc not in deeper}
    out = []
    for where, m in merged.items():
        # A field with one registered message carries its code; merged alternatives do not.
        code, params = coded[where] if where in coded and len(m) == 1 else (None, None)
        out.append(
            ProblemError(
                loc=list(where) or ["body"],
                field=field_of(where) or "body",
                msg="; or ".join(m),
                code=code,
                params=params,
            )
        )
    return out


def problem_from_plan_error(
    exc: PlanError, status: int = 422, *, prefix: Sequence[str | int] = ()
) -> Problem:
    """The problem for a core error; `prefix` re-roots its locations (a sweep's `base`)."""
    pre = list(prefix)
    errors = [
        ProblemError(
            loc=[*pre, *p.loc],
            field=field_of([*pre, *p.loc]),
            msg=p.msg,
            code=p.code,
            params=p.message.as_json(),
        )
        for p in exc.problems
    ]
    detail = exc.detail
    if pre and exc.problems:
        # The detail leads with the field name; name it from the request's root.
        own = exc.problems[0].field
        if own and detail.startswith(own):
            detail = field_of([*pre, *exc.problems[0].loc]) + detail[len(own) :]
    if not errors:
        whole = exc.message
        errors = [
            ProblemError(
                loc=pre or ["request"],
                field=field_of(pre) or "request",
                msg=detail,
                code=whole.code,
                params=whole.as_json(),
            )
        ]
    problem = make_problem(status, detail, title=exc.title, slug=exc.type_slug, errors=errors)
    suggestions = list(getattr(exc, "suggestions", ()))
    return problem.model_copy(update={"suggestions": suggestions}) if suggestions else problem


def validation_problem(errors: Iterable[Mapping[str, Any]], body: Any = _NO_NODE) -> Problem:
    """422 for a request that parsed but failed validation; pass the parsed `body` when known."""
    items = errors_from_pydantic(errors, body)
    detail = "; ".join(f"{e.field or '(body)'}: {e.msg}" for e in items[:5])
    if len(items) > 5:
        detail += f"; and {len(items) - 5} more"
    return make_problem(422, detail, title="Invalid request", slug="validation", errors=items)


__all__ = [
    "PROBLEM_MEDIA_TYPE",
    "Problem",
    "ProblemError",
    "ProblemException",
    "errors_from_pydantic",
    "field_error",
    "field_of",
    "make_problem",
    "problem_from_plan_error",
    "problem_type",
    "validation_problem",
]
