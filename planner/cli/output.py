"""CLI edges: read JSON input safely, and report bad input on stderr with exit 2.

The problem documents are built by the same functions the REST API uses
(`planner.contract.problems`, `planner.contract.strict_json`: no FastAPI is loaded), so a client
sees one error shape whichever surface it calls. A command run with flags prints them as a
readable message naming its flags (`--tp`, not `tensor_parallel_size`), unless it was given
`--json`; `--request` input, being the API's JSON, gets the problem+json itself.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
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
from planner.core.config_fields import json_constant
from planner.core.errors import FieldProblem, PlanError

MAX_INPUT_BYTES = 16 << 20
# `kvplan plan`: computed, but the engine will not start (2 is bad input, 0 starts).
EXIT_WONT_START = 3
M = TypeVar("M", bound=BaseModel)


@dataclass
class _Style:
    """How the running command reports bad input: problem+json (the default, and what
    `--request` and `--json` give) or a readable message naming the command's flags."""

    as_json: bool = True
    command: str = "kvplan"
    flags: Mapping[str, str] = field(default_factory=dict)


_STYLE = _Style()


def error_style(command: str, flags: Mapping[str, str], *, as_json: bool) -> None:
    """Set by a command before it reads its flags: `flags` maps request fields (dotted
    paths) to the flag that sets them, e.g. {"tensor_parallel_size": "--tp"}."""
    _STYLE.as_json, _STYLE.command, _STYLE.flags = as_json, command, dict(flags)


def _flag_of(path: str) -> str:
    """The flag for a dotted request path: the longest mapped prefix, plus what it leaves
    (e.g. `model.num_hidden_layers` → `--model num_hidden_layers`); else the path itself."""
    parts = path.split(".") if path else []
    for cut in range(len(parts), 0, -1):
        flag = _STYLE.flags.get(".".join(parts[:cut]))
        if flag is not None:
            rest = ".".join(parts[cut:])
            return f"{flag} {rest}" if rest else flag
    return path


# The API's way to give what the command line gives otherwise (the core and the resolver word
# their messages for the API; a person at a shell gives a file to --model).
_CLI_WORDING = (
    ("paste the model's config.json as `model` (a JSON object) instead",
     "give the model's config.json as a file instead: --model ./config.json"),
    ("paste the model's config.json as `model`",
     "give the model's config.json as a file: --model ./config.json"),
    ("GET /api/v1/models or `kvplan models`", "`kvplan models`"),
)  # fmt: skip


def _with_flags(text: str) -> str:
    """Field names inside a message read as the flags that set them; API wording as the
    command line's."""
    for api, cli in _CLI_WORDING:
        text = text.replace(api, cli)
    for name, flag in sorted(_STYLE.flags.items(), key=lambda kv: -len(kv[0])):
        leaf = name.rsplit(".", 1)[-1]
        if "_" in leaf:  # plain words such as "model" or "engine" stay words
            text = re.sub(rf"(?<![\w.-]){re.escape(leaf)}(?![\w-])", flag, text)
    return re.sub(r"(?<![\w-])(--[a-z][\w-]*)=true\b", r"\1", text)  # a switch takes no value


def readable(problem: Mapping[str, Any]) -> str:
    """A problem document as lines for a person: one per offending flag."""
    lines: list[str] = []
    for error in problem.get("errors") or []:
        where = _flag_of(str(error.get("field") or ""))
        message = _with_flags(str(error.get("msg") or ""))
        lines.append(f"{_STYLE.command}: {where}: {message}" if where else message)
    if not lines:
        lines.append(f"{_STYLE.command}: {_with_flags(str(problem.get('detail') or ''))}")
    lines.append(f"{_STYLE.command}: (add --json to get this as problem+json)")
    return "\n".join(lines)


def _write(problem_json: str) -> NoReturn:
    if _STYLE.as_json:
        sys.stderr.write(problem_json + "\n")
    else:
        sys.stderr.write(readable(json.loads(problem_json)) + "\n")
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


def read_json_source(source: str, field: str = "request", *, config: bool = False) -> Any:
    """Parse JSON from a file path or '-' (stdin): strict (no NaN/Infinity), bounded size.
    A config.json (`config`) may hold a bare Infinity or NaN as published (Nemotron's
    time_step_limit): each is read as the text it spells (config_fields.json_constant)."""
    data = read_source_bytes(source, field)
    try:
        constant = json_constant if config else _reject_constant
        return json.loads(data.decode("utf-8"), parse_constant=constant)
    except UnicodeDecodeError:
        _bad_input("input is not UTF-8 text", field)
    except ValueError as exc:
        _bad_input(f"invalid JSON: {exc}", field)


__all__ = [
    "FieldProblem",
    "emit_problem",
    "error_style",
    "fail",
    "parse_body",
    "parse_body_list",
    "read_json_source",
    "read_source_bytes",
]
