"""CLI edges: read JSON input safely, and turn errors into problem+json on stderr with exit 2.

The problem documents are built by the same functions the REST API uses
(`planner.contract.problems`, `planner.contract.strict_json`: no FastAPI is loaded), so a client
sees one error shape whichever surface it calls.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pydantic_core
import typer
from pydantic import BaseModel, TypeAdapter, ValidationError

from planner.contract.problems import (
    ProblemError,
    ProblemException,
    make_problem,
    problem_from_plan_error,
    validation_problem,
)
from planner.contract.strict_json import non_finite_path, parse_json_body
from planner.core.errors import FieldProblem, PlanError

MAX_INPUT_BYTES = 16 << 20
M = TypeVar("M", bound=BaseModel)


def _write(problem_json: str) -> NoReturn:
    sys.stderr.write(problem_json + "\n")
    raise typer.Exit(2)


def fail(exc: PlanError) -> NoReturn:
    _write(problem_from_plan_error(exc).model_dump_json(exclude_none=True))


def emit_problem(exc: ValidationError, body: Any = None) -> NoReturn:
    errors = exc.errors(include_url=False, include_input=False)
    problem = validation_problem(errors, body) if body is not None else validation_problem(errors)
    _write(problem.model_dump_json(exclude_none=True))


def parse_body(raw: bytes, model: type[M]) -> M:
    """Strict JSON → `model` with the API's exact rules (planner.contract), problems on stderr."""
    try:
        return parse_json_body(raw, model)
    except ProblemException as exc:
        _write(exc.problem.model_dump_json(exclude_none=True))


def parse_body_list(raw: bytes, adapter: TypeAdapter[list[M]]) -> list[M]:
    """A JSON list of request objects, validated all-or-nothing; errors located by index."""
    try:
        tree = pydantic_core.from_json(raw, allow_inf_nan=False)
    except ValueError as exc:
        _bad_input(f"invalid JSON ({exc}); send JSON without NaN/Infinity or trailing characters")
    where = non_finite_path(tree)
    if where is not None:
        _bad_input(f"{where}: number is not finite in a double; send a finite number")
    try:
        return adapter.validate_json(raw, strict=True)
    except ValidationError as exc:
        emit_problem(exc, tree)


def read_source_bytes(source: str, field: str = "request") -> bytes:
    """Raw bytes from a file path or '-' (stdin), bounded; errors name `field`."""
    try:
        if source == "-":
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            path = Path(source)
            if not path.is_file():
                _bad_input(f"no such file: {source}", field)
            with path.open("rb") as fh:
                data = fh.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        _bad_input(f"cannot read {source}: {exc.strerror}", field)
    if len(data) > MAX_INPUT_BYTES:
        _bad_input(f"input larger than {MAX_INPUT_BYTES} bytes", field)
    return data


def _bad_input(detail: str, field: str = "request") -> NoReturn:
    problem = make_problem(
        400,
        detail,
        title="Malformed input",
        slug="malformed-json",
        errors=[ProblemError(loc=[field], field=field, msg=detail)],
    )
    _write(problem.model_dump_json(exclude_none=True))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON; send a finite number")


def read_json_source(source: str, field: str = "request") -> Any:
    """Parse JSON from a file path or '-' (stdin): strict (no NaN/Infinity), bounded size."""
    data = read_source_bytes(source, field)
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        _bad_input("input is not UTF-8 text", field)
    except ValueError as exc:
        _bad_input(f"invalid JSON: {exc}", field)


__all__ = [
    "FieldProblem",
    "emit_problem",
    "fail",
    "parse_body",
    "parse_body_list",
    "read_json_source",
    "read_source_bytes",
]
