"""CLI edges: read JSON input safely, and turn errors into problem+json on stderr with exit 2.

The problem documents are built by the same functions the REST API uses (planner.api.problems),
so a client sees one error shape whichever surface it calls.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import typer
from pydantic import ValidationError

from planner.core.errors import FieldProblem, PlanError

MAX_INPUT_BYTES = 16 << 20


def _write(problem_json: str) -> NoReturn:
    sys.stderr.write(problem_json + "\n")
    raise typer.Exit(2)


def fail(exc: PlanError) -> NoReturn:
    from planner.api.problems import problem_from_plan_error

    _write(problem_from_plan_error(exc).model_dump_json(exclude_none=True))


def emit_problem(exc: ValidationError) -> NoReturn:
    from planner.api.problems import validation_problem

    _write(validation_problem(exc.errors()).model_dump_json(exclude_none=True))


def _bad_input(detail: str, field: str = "request") -> NoReturn:
    from planner.api.problems import make_problem
    from planner.api.schemas import ProblemError

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


def read_json_source(source: str) -> Any:
    """Parse JSON from a file path or '-' (stdin): strict (no NaN/Infinity), bounded size."""
    try:
        if source == "-":
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            path = Path(source)
            if not path.is_file():
                _bad_input(f"no such file: {source}")
            with path.open("rb") as fh:
                data = fh.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        _bad_input(f"cannot read {source}: {exc.strerror}")
    if len(data) > MAX_INPUT_BYTES:
        _bad_input(f"input larger than {MAX_INPUT_BYTES} bytes")
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        _bad_input("input is not UTF-8 text")
    except ValueError as exc:
        _bad_input(f"invalid JSON: {exc}")


__all__ = ["FieldProblem", "emit_problem", "fail", "read_json_source"]
