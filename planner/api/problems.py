"""Every error the service answers, as `application/problem+json` (RFC 9457), mapped here once.

The problem model and its builders live in `planner.contract.problems` (no FastAPI, shared with
the CLI); this module adds the Starlette response and the app's exception handlers.

Core errors (`PlanError` and subclasses), request validation, JSON syntax, HTTP errors (404,
405, 413, 415, 503) and unexpected failures all leave through `problem_response`, so clients
parse one shape: `type`, `title`, `status`, `detail`, and `errors[]` with `loc`, `field`, `msg`.
"""

from __future__ import annotations

import http
import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from planner.api.security import SECURITY_HEADERS
from planner.contract.problems import (
    PROBLEM_MEDIA_TYPE,
    Problem,
    ProblemError,
    ProblemException,
    errors_from_pydantic,
    field_of,
    make_problem,
    problem_from_plan_error,
    problem_type,
    validation_problem,
)
from planner.core.errors import PlanError

logger = logging.getLogger("planner.api")

_PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}


def problem_response(problem: Problem, headers: Mapping[str, str] | None = None) -> Response:
    return Response(
        content=problem.model_dump_json(exclude_none=True),
        status_code=problem.status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=dict(headers or {}),
    )


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


__all__ = [
    "PROBLEM_MEDIA_TYPE",
    "Problem",
    "ProblemError",
    "ProblemException",
    "errors_from_pydantic",
    "field_of",
    "install_problem_handlers",
    "make_problem",
    "problem_from_plan_error",
    "problem_response",
    "problem_responses",
    "problem_type",
    "validation_problem",
]
