"""The request a log implies: the reader's settings as a `PlanRequest`, resolved into `Inputs`
by `inputs.resolve` (the resolution `plan()` does), at the logged release. A log reader asks the
engine its rules on those `Inputs`, so it keeps no second copy of the resolution."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from planner.core.engines import Engine
from planner.core.errors import Message, PlanError
from planner.core.inputs import Catalog, Inputs, resolve
from planner.core.reconcile_common import Ctx
from planner.core.schema import PlanRequest


@cache
def _field_type(name: str) -> TypeAdapter[Any]:
    annotation = PlanRequest.model_fields[name].annotation
    assert annotation is not None
    return TypeAdapter(annotation)


def _logged_value(text: str) -> Any:
    """A ServerArgs value as Python printed it: an int, a float, or a word."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def logged_flags(engine: Engine, args: Mapping[str, str]) -> dict[str, Any]:
    """The request fields the engine's argument dump states (`Engine.logged_flags`), each as
    PlanRequest takes it: a value the schema refuses, or an unset one (None), is left out."""
    out: dict[str, Any] = {}
    for name in engine.logged_flags:
        text = args.get(name)
        if text is None or text == "None":
            continue
        try:
            out[name] = _field_type(name).validate_python(_logged_value(text))
        except ValidationError:
            continue
    return out


def log_fields(ctx: Ctx) -> dict[str, Any] | None:
    """The PlanRequest fields the log and the reconcile request settle (no memory figures),
    or None without a model."""
    if ctx.model_ref is None:
        return None
    s = ctx.settings
    engine = ctx.engine
    body: dict[str, Any] = {
        "model": ctx.model_ref,
        "engine": engine.name,
        "engine_version": engine.version_text,
        "kv_cache_dtype": "auto" if s.dtype_name.strip().lower() == "auto" else s.dtype_name,
        "block_size": s.block,
        "tensor_parallel_size": s.tp,
        "pipeline_parallel_size": s.pp,
        # The log ran it: a max_model_len past the model's is one the deployment allowed.
        "allow_long_max_model_len": True,
    }
    if s.max_model_len is not None:
        body["context_tokens"] = s.max_model_len
    if engine.reports_max_num_batched_tokens():
        body["max_num_batched_tokens"] = s.max_num_batched_tokens
        body["hybrid_kv_cache_manager"] = s.hybrid
    logged_async = ctx.log.args.get("async_scheduling")
    if engine.takes_async_scheduling and logged_async in ("True", "False"):
        body["async_scheduling"] = logged_async == "True"
    if s.gpu_id is not None:
        body["gpu"] = s.gpu_id
    if s.speculative is not None:
        body["speculative_config"] = s.speculative
    body.update(ctx.plan_extra)
    return body


def log_request(ctx: Ctx, kv_budget_bytes: int | None = None) -> PlanRequest | None:
    """The request the log implies, with the KV memory it logged as the budget when given."""
    body = log_fields(ctx)
    if body is None:
        return None
    if kv_budget_bytes is not None:
        body["kv_budget_bytes"] = kv_budget_bytes
    return PlanRequest.model_validate(body)


def log_inputs(ctx: Ctx, catalog: Catalog) -> tuple[Inputs | None, Message | str]:
    """The log's request resolved as plan() resolves it; None, with the release's own reason,
    when the release's rules refuse it (or without a model)."""
    try:
        request = log_request(ctx)
        if request is None:
            return None, ctx.no_model_reason
        return resolve(request, catalog), ""
    except (PlanError, ValueError) as exc:
        problems = getattr(exc, "problems", None)
        return None, problems[0].message if problems else str(exc)


__all__ = ["log_fields", "log_inputs", "log_request", "logged_flags"]
