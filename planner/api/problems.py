"""Every error the service answers, as `application/problem+json` (RFC 9457), mapped here once.

Core errors (`PlanError` and subclasses), request validation, JSON syntax, HTTP errors (404,
405, 413, 415, 503) and unexpected failures all leave through `problem_response`, so clients
parse one shape: `type`, `title`, `status`, `detail`, and `errors[]` with `loc`, `field`, `msg`.
"""

from __future__ import annotations

import http
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from planner.api.schemas import PROBLEM_MEDIA_TYPE, Problem, ProblemError
from planner.api.security import SECURITY_HEADERS
from planner.core.errors import FieldProblem, PlanError

logger = logging.getLogger("planner.api")

_PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}


def problem_type(slug: str) -> str:
    """Our problem types are URNs: stable names that promise no page behind them."""
    return f"urn:kvplan:problem:{slug}"


def field_of(loc: Sequence[str | int]) -> str:
    """`("requests", 3, "count")` → `requests[3].count` (same rule as the CLI's errors)."""
    return FieldProblem(tuple(loc), "").field


def problem_response(problem: Problem, headers: Mapping[str, str] | None = None) -> Response:
    return Response(
        content=problem.model_dump_json(exclude_none=True),
        status_code=problem.status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=dict(headers or {}),
    )


def make_problem(
    status: int,
    detail: str,
    *,
    title: str | None = None,
    slug: str | None = None,
    errors: Iterable[ProblemError] = (),
) -> Problem:
    """A problem; without `slug` the type is about:blank and the title the HTTP phrase."""
    phrase = http.HTTPStatus(status).phrase
    return Problem(
        type=problem_type(slug) if slug else "about:blank",
        title=title or phrase,
        status=status,
        detail=detail,
        errors=list(errors),
    )


class ProblemException(Exception):
    """Raise anywhere in a request to answer with this problem."""

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


def errors_from_pydantic(
    errors: Iterable[Mapping[str, Any]], body: Any = _NO_NODE
) -> list[ProblemError]:
    """Pydantic error dicts → `errors[]`, never echoing the input (it may hold secrets).

    With the parsed `body`, union labels are dropped from `loc` and the alternatives' messages
    for one field are merged ("a valid string, or a valid dictionary").
    """
    merged: dict[tuple[str | int, ...], list[str]] = {}
    for error in errors:
        raw_loc = [part if isinstance(part, int) else str(part) for part in error.get("loc", ())]
        error_type = str(error.get("type", ""))
        loc = raw_loc if body is _NO_NODE else _strip_union_tags(raw_loc, error_type, body)
        msg = str(error.get("msg", "invalid value"))
        if error_type == "extra_forbidden":
            msg = "unknown field; remove it (see the request schema for the accepted fields)"
        elif error_type == "value_error":
            # Pydantic prefixes a validator's own message with "Value error, ": drop the noise.
            msg = msg.removeprefix("Value error, ")
        messages = merged.setdefault(tuple(loc), [])
        if msg not in messages:
            messages.append(msg)
    if body is not _NO_NODE:
        # A union alternative that got further ("gpu.memory_bytes: Field required") says more
        # than the one that failed at once ("gpu: Input should be a valid string").
        deeper = {loc[:n] for loc in merged for n in range(len(loc))}
        merged = {loc: m for loc, m in merged.items() if loc not in deeper}
    return [
        ProblemError(loc=list(loc), field=field_of(loc), msg="; or ".join(messages))
        for loc, messages in merged.items()
    ]


def problem_from_plan_error(exc: PlanError, status: int = 422) -> Problem:
    return make_problem(
        status,
        exc.detail,
        title=exc.title,
        slug=exc.type_slug,
        errors=[ProblemError(loc=list(p.loc), field=p.field, msg=p.msg) for p in exc.problems],
    )


def validation_problem(errors: Iterable[Mapping[str, Any]], body: Any = _NO_NODE) -> Problem:
    """422 for a request that parsed but failed validation; pass the parsed `body` when known."""
    items = errors_from_pydantic(errors, body)
    detail = "; ".join(f"{e.field or '(body)'}: {e.msg}" for e in items[:5])
    if len(items) > 5:
        detail += f"; and {len(items) - 5} more"
    return make_problem(422, detail, title="Invalid request", slug="validation", errors=items)


async def _on_plan_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, PlanError)
    return problem_response(problem_from_plan_error(exc))


async def _on_problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ProblemException)
    return problem_response(exc.problem, exc.headers)


async def _on_validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return problem_response(validation_problem(exc.errors()))


async def _on_http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else http.HTTPStatus(exc.status_code).phrase
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no route for {request.url.path}; see /api/v1/openapi.json"
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        templates = getattr(request.app.state, "route_templates", None)
        methods = templates.allowed_methods(request.url.path) if templates else []
        if methods:
            headers["Allow"] = ", ".join(methods)
        allowed = headers.get("Allow", "")
        detail = f"{request.method} is not allowed here; allowed: {allowed or 'none'}"
    return problem_response(make_problem(exc.status_code, detail), headers)


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    # Logged with its traceback (never the body); the client gets no internals.
    logger.error("unhandled error", exc_info=exc)
    problem = make_problem(
        500, "the server failed to answer this request; quote the X-Request-ID header"
    )
    headers = dict(SECURITY_HEADERS)
    request_id = getattr(request.state, "request_id", None)
    if isinstance(request_id, str):
        headers["X-Request-ID"] = request_id
    return problem_response(problem, headers)


def install_problem_handlers(app: FastAPI) -> None:
    app.add_exception_handler(PlanError, _on_plan_error)
    app.add_exception_handler(ProblemException, _on_problem)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(StarletteHTTPException, _on_http)
    app.add_exception_handler(Exception, _on_unexpected)


_DESCRIPTIONS = {
    400: "Malformed JSON (syntax, trailing characters, NaN/Infinity, not UTF-8).",
    404: "Unknown id or path.",
    405: "Method not allowed; see the Allow header.",
    413: "Request body larger than KVPLAN_MAX_BODY_BYTES (default 1 MiB).",
    415: "Body is not application/json.",
    422: "Well-formed but invalid: `errors` names each field and what would work.",
    503: "Not ready: the catalog or the calibration store is unavailable.",
}


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` entries for these statuses, each a problem+json body."""
    return {
        status: {
            "description": _DESCRIPTIONS.get(status, http.HTTPStatus(status).phrase),
            "content": {PROBLEM_MEDIA_TYPE: {"schema": _PROBLEM_REF}},
        }
        for status in statuses
    }
