"""The refusal of a context beyond the model's maximum length, by engines that refuse it."""

from __future__ import annotations

from planner.core import schema as s
from planner.core.errors import FieldError


def long_context_refusal(
    request: s.PlanRequest, label: str, override: str | None, ctx: int, max_len: int | None
) -> FieldError | None:
    """The engine's refusal of `ctx` tokens beyond `max_len`, or None where it serves them
    (within the length, no such refusal, or its `override` set)."""
    if not max_len or ctx <= max_len or not override or request.allow_long_max_model_len:
        return None
    field = "context_tokens" if request.context_tokens is not None else "requests"
    return FieldError(
        field,
        "input.context_above_model_maximum",
        ctx=ctx,
        max_len=max_len,
        label=label,
        override=override,
    )


__all__ = ["long_context_refusal"]
