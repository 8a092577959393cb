"""Read a JSON body with the same strictness everywhere (API, page, CLI).

The raw bytes are parsed once as strict JSON — no NaN/Infinity, no number that overflows a
double, no trailing characters, UTF-8 only — and then validated by the model's JSON validator in
strict mode. Errors are `ProblemException`s: 400 malformed (with `loc: ["body"]`, line and
column), 422 invalid (each field named).
"""

from __future__ import annotations

import math
import re
from typing import Any, TypeVar

import pydantic_core
from pydantic import BaseModel, ValidationError

from planner.contract.problems import (
    ProblemError,
    ProblemException,
    make_problem,
    validation_problem,
)

M = TypeVar("M", bound=BaseModel)

_LINE_COLUMN = re.compile(r"line (\d+) column (\d+)")
# Where a body could hold a number that is not finite in a double: an exponent (1e400), a
# literal of 300 digits or more, or NaN/Infinity spelled out (refused by the parser). A body
# without any of them is validated straight from its bytes, parsed once.
_MAYBE_NON_FINITE = re.compile(rb"\d[eE]|\d{300}|NaN|Inf")


def is_json_media_type(content_type: str | None) -> bool:
    """`application/json` or `application/*+json`, with no charset other than UTF-8."""
    if not content_type:
        return False
    media_type, _, params = content_type.partition(";")
    media_type = media_type.strip().lower()
    if media_type != "application/json" and not (
        media_type.startswith("application/") and media_type.endswith("+json")
    ):
        return False
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip().strip('"').lower() not in (
            "utf-8",
            "utf8",
        ):
            return False
    return True


def non_finite_path(tree: Any) -> str | None:
    """Where a float is not finite (e.g. `1e400` parses to inf), as a dotted path."""
    stack: list[tuple[Any, str]] = [(tree, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, float):
            if not math.isfinite(node):
                return path or "(body)"
        elif isinstance(node, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(node))
    return None


def malformed(detail: str, msg: str | None = None) -> ProblemException:
    """400 for a body that is not JSON; `errors[0]` is `loc: ["body"]`, with the position the
    parser names in `msg` (`line 1 column 5`)."""
    text = msg or detail
    found = _LINE_COLUMN.search(text)
    error = ProblemError(
        loc=["body"],
        field="body",
        msg=text,
        line=int(found.group(1)) if found else None,
        column=int(found.group(2)) if found else None,
    )
    return ProblemException(
        make_problem(
            400, detail, title="Malformed JSON body", slug="malformed-json", errors=[error]
        )
    )


def parse_json_tree(raw: bytes) -> Any:
    """Strict JSON → Python values, or a 400 `ProblemException`."""
    try:
        tree = pydantic_core.from_json(raw, allow_inf_nan=False)
    except ValueError as exc:
        raise malformed(
            f"body is not valid JSON ({exc}); send one JSON object, UTF-8, without "
            "NaN/Infinity or trailing characters",
            str(exc),
        ) from None
    where = non_finite_path(tree)
    if where is not None:
        raise malformed(f"{where}: number is not finite in a double; send a finite number")
    return tree


def parse_json_body(raw: bytes, model: type[M]) -> M:
    """Strict JSON → `model`, or a `ProblemException` (400 malformed, 422 invalid)."""
    # The tree (a second parse) is needed only to refuse a non-finite number before
    # validating, and to locate a validation error; the usual body needs neither.
    tree = parse_json_tree(raw) if _MAYBE_NON_FINITE.search(raw) else None
    try:
        # strict: no bool→number or str→number coercion in any body model (not only the
        # ones declared strict); JSON strings still parse as datetimes.
        return model.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        if tree is None:
            tree = parse_json_tree(raw)  # not JSON at all: 400, as before validating
        raise ProblemException(
            validation_problem(exc.errors(include_url=False, include_input=False), tree)
        ) from None


__all__ = [
    "is_json_media_type",
    "malformed",
    "non_finite_path",
    "parse_json_body",
    "parse_json_tree",
]
