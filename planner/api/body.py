"""Read a JSON request body with the same strictness as `PlanRequest.model_validate_json`.

FastAPI's own body parsing goes through `json.loads` (which accepts NaN and Infinity) and then
validates in Python mode. Here the raw bytes go through `planner.contract.strict_json` (strict
JSON, then the model's JSON validator), exactly as `kvplan plan --request` does.
"""

from __future__ import annotations

from typing import TypeVar

from fastapi import Request
from pydantic import BaseModel

from planner.contract.problems import ProblemException, make_problem
from planner.contract.strict_json import is_json_media_type, parse_json_body

M = TypeVar("M", bound=BaseModel)


def unsupported_media_type() -> ProblemException:
    return ProblemException(
        make_problem(
            415,
            "send the body as JSON with `Content-Type: application/json`",
            title="Unsupported media type",
            slug="unsupported-media-type",
        )
    )


async def read_json_body(request: Request, model: type[M]) -> M:
    if not is_json_media_type(request.headers.get("content-type")):
        raise unsupported_media_type()
    return parse_json_body(await request.body(), model)


__all__ = ["is_json_media_type", "parse_json_body", "read_json_body", "unsupported_media_type"]
