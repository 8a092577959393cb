"""OpenAPI for bodies the routes parse themselves (strict JSON, see `body.py`).

Such routes take the raw `Request`, so FastAPI does not see their body model; `json_body` names
it in the operation and `install_openapi` adds its schema (and the problem schema every error
response points at) to `components`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema
from starlette.routing import BaseRoute

_REF = "#/components/schemas/{model}"


def json_body(schema_name: str) -> dict[str, Any]:
    """`openapi_extra` for a required `application/json` body of a component schema."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": _REF.format(model=schema_name)}}},
        }
    }


# Strings the handlers refuse when empty (the core answers "" with a 422 naming the field): the
# schema says so too (`minLength`), so a client or fuzzer reading it never sends one as valid.
NON_EMPTY_STRINGS: tuple[tuple[str, str], ...] = (
    ("PlanRequest", "model"),
    ("RecommendRequest", "model"),
    ("ReconcileRequest", "model"),
    ("ReconcileRequest", "log"),
)


def require_non_empty(components: dict[str, Any]) -> None:
    for schema_name, prop in NON_EMPTY_STRINGS:
        node = components.get(schema_name, {}).get("properties", {}).get(prop)
        if node is None:
            continue
        for branch in [node, *node.get("anyOf", ())]:
            if branch.get("type") == "string":
                branch.setdefault("minLength", 1)


def install_openapi(
    app: FastAPI,
    extra: list[tuple[type[BaseModel], JsonSchemaMode]],
    routes: Sequence[BaseRoute] | None = None,
) -> None:
    """`routes`: the operations in the order the document lists them (default: matching's)."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=list(routes) if routes is not None else app.routes,
            )
            _, top = models_json_schema(extra, ref_template=_REF)
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, definition in top.get("$defs", {}).items():
                components.setdefault(name, definition)
            require_non_empty(components)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = build  # type: ignore[method-assign]
