"""Read a JSON request body with the same strictness as `PlanRequest.model_validate_json`.

FastAPI's own body parsing goes through `json.loads` (which accepts NaN and Infinity) and then
validates in Python mode. Here the raw bytes are parsed once as strict JSON — no NaN/Infinity,
no number that overflows a double, no trailing characters, UTF-8 only — and then validated by the
model's JSON validator, exactly as `kvplan plan --request` does.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

import pydantic_core
from fastapi import Request
from pydantic import BaseModel, ValidationError

from planner.api.problems import ProblemException, make_problem, validation_problem

M = TypeVar("M", bound=BaseModel)


def _is_json_media_type(content_type: str | None) -> bool:
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


def _non_finite_path(tree: Any) -> str | None:
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


def _malformed(detail: str) -> ProblemException:
    return ProblemException(
        make_problem(400, detail, title="Malformed JSON body", slug="malformed-json")
    )


def parse_json_body(raw: bytes, model: type[M]) -> M:
    """Strict JSON → `model`, or a `ProblemException` (400 malformed, 422 invalid)."""
    try:
        tree = pydantic_core.from_json(raw, allow_inf_nan=False)
    except ValueError as exc:
        raise _malformed(
            f"body is not valid JSON ({exc}); send one JSON object, UTF-8, without "
            "NaN/Infinity or trailing characters"
        ) from None
    where = _non_finite_path(tree)
    if where is not None:
        raise _malformed(f"{where}: number is not finite in a double; send a finite number")
    try:
        # strict: no bool→number or str→number coercion in any body model (not only the
        # ones declared strict); JSON strings still parse as datetimes.
        return model.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        raise ProblemException(
            validation_problem(exc.errors(include_url=False, include_input=False), tree)
        ) from None


async def read_json_body(request: Request, model: type[M]) -> M:
    if not _is_json_media_type(request.headers.get("content-type")):
        raise ProblemException(
            make_problem(
                415,
                "send the body as JSON with `Content-Type: application/json`",
                title="Unsupported media type",
                slug="unsupported-media-type",
            )
        )
    return parse_json_body(await request.body(), model)
