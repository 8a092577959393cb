"""Reading integer fields of a config.json object, with a refusal naming the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.core.errors import ModelConfigError


def int_field(cfg: Mapping[str, Any], key: str, *, lo: int = 1, hi: int = 1 << 40) -> int | None:
    value = cfg.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelConfigError(
            ("model", key),
            "model.not_integer_typed",
            type=type(value).__name__,
            value=value,
        )
    if not lo <= value <= hi:
        raise ModelConfigError(
            ("model", key), "model.value_out_of_range", lo=lo, hi=hi, value=value
        )
    return int(value)


def json_constant(name: str) -> str:
    """A bare `Infinity`, `-Infinity` or `NaN` in a published config.json (json.loads'
    parse_constant): kept as the text it spells, so the config stays strict JSON downstream
    and a field the planner reads that holds one is refused as not a number."""
    return name


__all__ = ["int_field", "json_constant"]
