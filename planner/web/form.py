"""The page's form: raw strings in, a `PlanRequest` (or errors keyed by form field) out.

Form fields are the API's field names, except where a unit makes the form friendlier:
`kv_budget_gib` and `weights_gib` (GiB, 2^30 B), `bandwidth_tbps` (decimal TB/s), `requests`
as text (`8192x10, 2048x30`: tokens × count) and `model_config` (a pasted config.json, POST only).
Every value goes through `PlanRequest` afterwards, exactly like API input.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from pydantic import ValidationError

from planner.core.errors import FieldProblem, ModelConfigError, PlanError, UnknownIdError
from planner.core.schema import (
    ENGINES,
    MAX_BANDWIDTH_BYTES_PER_S,
    MAX_BYTES,
    MAX_COUNT,
    MAX_PARALLEL,
    MAX_REQUEST_ENTRIES,
    MAX_TOKENS,
    PlanRequest,
)

Gettext = Callable[[str], str]

GiB = 1 << 30
TB = 10**12
# A published config.json is a few KiB; this leaves room for long `*_config` blocks.
MAX_CONFIG_CHARS = 256 * 1024
MAX_TEXT_CHARS = 200

# The query-string fields, in the order a shared URL lists them.
QUERY_FIELDS: tuple[str, ...] = (
    "model",
    "engine",
    "kv_cache_dtype",
    "context_tokens",
    "requests",
    "kv_budget_gib",
    "gpu",
    "gpu_memory_utilization",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "block_size",
    "max_num_batched_tokens",
    "weights_gib",
    "bandwidth_tbps",
    "calibration_id",
)
FORM_FIELDS: tuple[str, ...] = (*QUERY_FIELDS, "model_config")
# Values the form's selects start with; a URL need not repeat them.
DEFAULTS: dict[str, str] = {"engine": "vllm", "kv_cache_dtype": "auto"}
# Shown under "More options"; the details element opens when one of them is set or wrong.
ADVANCED_FIELDS: tuple[str, ...] = (
    "block_size",
    "max_num_batched_tokens",
    "weights_gib",
    "bandwidth_tbps",
    "calibration_id",
)

_INT_FIELDS: dict[str, tuple[int, int]] = {
    "context_tokens": (1, MAX_TOKENS),
    "tensor_parallel_size": (1, MAX_PARALLEL),
    "pipeline_parallel_size": (1, MAX_PARALLEL),
    "block_size": (1, 1 << 16),
    "max_num_batched_tokens": (1, MAX_TOKENS),
}
_GIB_FIELDS: dict[str, str] = {"kv_budget_gib": "kv_budget_bytes", "weights_gib": "weights_bytes"}
# API field → form field, for errors the core or pydantic report.
_API_TO_FORM: dict[str, str] = {
    "kv_budget_bytes": "kv_budget_gib",
    "weights_bytes": "weights_gib",
    "bandwidth_bytes_per_s": "bandwidth_tbps",
}
_GROUPING = re.compile(r"[\s,_\u202f\u00a0]")
_MIX_ITEM = re.compile(r"^(\d+)(?:[x×*](\d+))?$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class FieldMessage:
    """An error shown next to a field: `text` in the user's language, `detail` from the core
    (English, shown as such) when the core said more than the form layer knows."""

    text: str
    detail: str | None = None


@dataclass
class FormState:
    values: dict[str, str]
    errors: dict[str, list[FieldMessage]] = field(default_factory=dict)
    request: PlanRequest | None = None

    @property
    def submitted(self) -> bool:
        return is_question(self.values)

    @property
    def has_config(self) -> bool:
        return bool(self.values.get("model_config", "").strip())

    def add(self, name: str, message: FieldMessage) -> None:
        self.errors.setdefault(name, []).append(message)

    def share_query(self) -> str:
        """The URL query that reproduces this answer (no pasted config: too long for a URL)."""
        return canonical_query(self.values)


def _given(values: Mapping[str, str], name: str) -> str:
    """The field's value, or "" when it is empty or the form's own default."""
    value = values.get(name, "").strip()
    return "" if value == DEFAULTS.get(name) else value


def is_question(values: Mapping[str, str]) -> bool:
    """Anything asked beyond the defaults (a bare form, e.g. after the language toggle, is not)."""
    return any(_given(values, name) for name in FORM_FIELDS)


def canonical_query(values: Mapping[str, str]) -> str:
    """The shortest query that asks the same: non-empty, non-default fields in a fixed order."""
    pairs = [(n, _given(values, n)) for n in QUERY_FIELDS if _given(values, n)]
    return urlencode(pairs, safe="/")


def raw_values(source: Mapping[str, Any], *, allow_config: bool) -> dict[str, str]:
    """The known fields as stripped strings (last value wins; files and unknown keys ignored)."""
    names = FORM_FIELDS if allow_config else QUERY_FIELDS
    out: dict[str, str] = {}
    for name in names:
        value = source.get(name)
        if isinstance(value, str):
            out[name] = value if name == "model_config" else value.strip()
    return out


def _parse_int(text: str, lo: int, hi: int, _: Gettext) -> tuple[int | None, str | None]:
    digits = _GROUPING.sub("", text)
    if not digits.isdigit():
        return None, _("Enter a whole number, e.g. %(example)s.") % {"example": "8192"}
    value = int(digits[:20])
    if not lo <= value <= hi:
        return None, _("Enter a number from %(lo)s to %(hi)s.") % {"lo": f"{lo:,}", "hi": f"{hi:,}"}
    return value, None


def _parse_float(text: str, _: Gettext) -> tuple[float | None, str | None]:
    cleaned = _GROUPING.sub("", text)
    try:
        value = float(cleaned)
    except ValueError:
        return None, _("Enter a number, e.g. %(example)s.") % {"example": "48"}
    if not math.isfinite(value):
        return None, _("Enter a finite number.")
    return value, None


def _parse_mix(text: str, _: Gettext) -> tuple[list[dict[str, int]] | None, str | None]:
    items = [part.strip() for part in re.split(r"[,;\n]+", text) if part.strip()]
    if not items:
        return None, None
    if len(items) > MAX_REQUEST_ENTRIES:
        return None, _("At most %(n)s entries.") % {"n": MAX_REQUEST_ENTRIES}
    mix: list[dict[str, int]] = []
    for item in items:
        match = _MIX_ITEM.match(re.sub(r"[\s_\u202f\u00a0]", "", item))
        if match is None:
            return None, _("Cannot read %(item)s: write tokens × count, e.g. 8192x10, 2048x30.") % {
                "item": repr(item[:40])
            }
        tokens, count = int(match.group(1)[:20]), int((match.group(2) or "1")[:20])
        if not 1 <= tokens <= MAX_TOKENS or not 1 <= count <= MAX_COUNT:
            return None, _(
                "Each entry needs 1 to %(tokens)s tokens and 1 to %(count)s requests."
            ) % {"tokens": f"{MAX_TOKENS:,}", "count": f"{MAX_COUNT:,}"}
        mix.append({"context_tokens": tokens, "count": count})
    return mix, None


def _parse_config(text: str, _: Gettext) -> tuple[dict[str, Any] | None, str | None]:
    if len(text) > MAX_CONFIG_CHARS:
        return None, _("The config is longer than %(n)s characters.") % {
            "n": f"{MAX_CONFIG_CHARS:,}"
        }
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        message = _("Not valid JSON (line %(line)s, column %(col)s): paste config.json as is.")
        return None, message % {"line": error.lineno, "col": error.colno}
    except RecursionError:
        return None, _("The JSON is nested too deeply.")
    if not isinstance(value, dict):
        return None, _("Paste a JSON object: the whole config.json, starting with {.")
    return value, None


def _numbers(values: Mapping[str, str], state: FormState, _: Gettext) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for name, (lo, hi) in _INT_FIELDS.items():
        if values.get(name):
            number, error = _parse_int(values[name], lo, hi, _)
            if error:
                state.add(name, FieldMessage(error))
            else:
                body[name] = number
    for name, api_name in _GIB_FIELDS.items():
        if values.get(name):
            gib, error = _parse_float(values[name], _)
            if error is None and gib is not None and not 0 <= gib * GiB <= MAX_BYTES:
                error = _("Enter GiB from 0 to %(hi)s.") % {"hi": f"{MAX_BYTES // GiB:,}"}
            if error or gib is None:
                state.add(name, FieldMessage(error or ""))
            else:
                body[api_name] = round(gib * GiB)
    if values.get("bandwidth_tbps"):
        tbps, error = _parse_float(values["bandwidth_tbps"], _)
        hi_tbps = MAX_BANDWIDTH_BYTES_PER_S / TB
        if error is None and tbps is not None and not 0 < tbps <= hi_tbps:
            error = _("Enter TB/s above 0 and at most %(hi)s.") % {"hi": f"{hi_tbps:,.0f}"}
        if error or tbps is None:
            state.add("bandwidth_tbps", FieldMessage(error or ""))
        else:
            body["bandwidth_bytes_per_s"] = tbps * TB
    if values.get("gpu_memory_utilization"):
        util, error = _parse_float(values["gpu_memory_utilization"], _)
        if error is None and util is not None and not 0 < util <= 1:
            error = _("Enter a fraction above 0 and at most 1, e.g. 0.9.")
        if error or util is None:
            state.add("gpu_memory_utilization", FieldMessage(error or ""))
        else:
            body["gpu_memory_utilization"] = util
    return body


def _texts(values: Mapping[str, str], state: FormState, _: Gettext) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for name in ("model", "kv_cache_dtype", "gpu", "calibration_id"):
        if values.get(name):
            if len(values[name]) > MAX_TEXT_CHARS:
                state.add(name, FieldMessage(_("Too long.")))
            else:
                body[name] = values[name]
    engine = values.get("engine")
    if engine:
        if engine in ENGINES:
            body["engine"] = engine
        else:
            state.add(
                "engine", FieldMessage(_("Choose one of: %(list)s.") % {"list": ", ".join(ENGINES)})
            )
    if values.get("requests"):
        mix, error = _parse_mix(values["requests"], _)
        if error:
            state.add("requests", FieldMessage(error))
        elif mix:
            body["requests"] = mix
    return body


def form_field(loc: tuple[str | int, ...], *, has_config: bool) -> str:
    """The form field an API error location points at; `""` for the form as a whole."""
    if not loc:
        return ""
    head = str(loc[0])
    if head == "model":
        return "model_config" if has_config else "model"
    head = _API_TO_FORM.get(head, head)
    return head if head in FORM_FIELDS else ""


def _pydantic_text(error: Mapping[str, Any], _: Gettext) -> str:
    kind = error.get("type", "")
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return _("Required.")
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        limit = next(iter(ctx.values()), "")
        symbol = {
            "greater_than": ">",
            "greater_than_equal": "≥",
            "less_than": "<",
            "less_than_equal": "≤",
        }[kind]
        return _("Must be %(symbol)s %(limit)s.") % {"symbol": symbol, "limit": limit}
    if kind in ("string_too_long", "too_long"):
        return _("Too long.")
    return _("Not a valid value.")


def core_message(error: PlanError, problem: FieldProblem, _: Gettext) -> FieldMessage:
    """A core error as a field message: a lead in the user's language, the core's detail."""
    if isinstance(error, ModelConfigError):
        lead = _("This config.json cannot be used.")
    elif isinstance(error, UnknownIdError):
        lead = _("Not found.")
    else:
        lead = _("This value cannot be planned.")
    return FieldMessage(lead, problem.msg)


def parse(values: Mapping[str, str], _: Gettext) -> FormState:
    """Validate the form; `state.request` is set only when every field is usable."""
    state = FormState(values=dict(values))
    body: dict[str, Any] = {}
    body.update(_numbers(values, state, _))
    body.update(_texts(values, state, _))
    if state.has_config:
        config, error = _parse_config(values["model_config"], _)
        if error:
            state.add("model_config", FieldMessage(error))
        else:
            body["model"] = config
    elif "model" not in body and "model" not in state.errors:
        state.add("model", FieldMessage(_("Choose a model from the list, or paste a config.json.")))
    if state.errors:
        return state
    try:
        state.request = PlanRequest.model_validate(body)
    except ValidationError as error:
        for item in error.errors(include_input=False):
            loc = tuple(part if isinstance(part, int) else str(part) for part in item["loc"])
            name = form_field(loc, has_config=state.has_config)
            state.add(name, FieldMessage(_pydantic_text(item, _), item.get("msg")))
    return state
