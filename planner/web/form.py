"""The page's form: raw strings in, a `PlanRequest` (or errors keyed by form field) out.

Form fields are the API's field names, except where a unit makes the form friendlier:
`kv_budget_gib` and `weights_gib` (GiB, 2^30 B), `bandwidth_tbps` (decimal TB/s), `requests`
as text (`8192x10, 2048x30`: tokens × count) and `model_config` (a pasted config.json, POST only).
Every value goes through `PlanRequest` afterwards, exactly like API input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from pydantic import ValidationError

from planner.catalog import get_gpu
from planner.core.config_fields import json_constant
from planner.core.errors import (
    ERROR_TEMPLATES,
    FieldProblem,
    Message,
    ModelConfigError,
    PlanError,
    UnknownIdError,
    did_you_mean,
    dotted,
)
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
from planner.quantities import QuantityError, read_number, read_rate, read_size, read_tokens
from planner.resolve.errors import HubUnavailableError
from planner.web.i18n import message_text

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
    "max_num_seqs",
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
    "max_num_seqs",
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
    "max_num_seqs": (1, MAX_COUNT),
}
# Token counts accept k and M (8k = 8192), as the chart ticks print them.
_TOKEN_FIELDS = frozenset({"context_tokens", "max_num_batched_tokens"})
_GIB_FIELDS: dict[str, str] = {"kv_budget_gib": "kv_budget_bytes", "weights_gib": "weights_bytes"}
# API field → form field, for errors the core or pydantic report.
_API_TO_FORM: dict[str, str] = {
    "kv_budget_bytes": "kv_budget_gib",
    "weights_bytes": "weights_gib",
    "bandwidth_bytes_per_s": "bandwidth_tbps",
}
_MIX_SPLIT = re.compile(r"\s*[x×*]\s*", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class FieldMessage:
    """An error shown next to a field: `text` in the user's language, `detail` from the core
    when the core said more than the form layer knows, in the user's language where the
    catalog translates its code (`detail_lang` None), else English (`detail_lang` "en")."""

    text: str
    detail: str | None = None
    detail_lang: str | None = "en"


def core_detail(lead: str, message: Message, _: Gettext, prefix: str = "") -> FieldMessage:
    """A lead and the core's message as its detail, translated where the catalog has it."""
    shown = message_text(message, _)
    if shown is None:
        return FieldMessage(lead, f"{prefix} {message.text}" if prefix else message.text)
    # A translation is a sentence of its own: the config field it is about leads, then a colon.
    return FieldMessage(lead, f"{prefix}：{shown}" if prefix else shown, None)


@dataclass
class FormState:
    values: dict[str, str]
    errors: dict[str, list[FieldMessage]] = field(default_factory=dict)
    request: PlanRequest | None = None
    partial: PlanRequest | None = None

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


def quantity_message(error: QuantityError, _: Gettext, fallback: str) -> str:
    """A reading error in the user's language (the codes are planner.quantities'); `fallback`
    says what the field wants when the text is not a number at all."""
    if error.code == "decimal_comma":
        return _(
            "%(text)s is ambiguous: write a dot for decimals (%(dot)s) or whole groups of "
            "three digits (1,500)."
        ) % {"text": error.text.strip(), "dot": error.text.strip().replace(",", ".")}
    if error.code == "unknown_unit":
        return _("Unknown unit in %(text)s: use %(units)s.") % {
            "text": error.text.strip(),
            "units": ", ".join(error.units),
        }
    return fallback


def _range(lo: float, hi: float, unit: str, _: Gettext) -> str:
    return _("Enter a number from %(lo)s to %(hi)s.") % {
        "lo": f"{lo:,g}" + unit,
        "hi": f"{hi:,.0f}" + unit,
    }


def _parse_int(name: str, text: str, lo: int, hi: int, _: Gettext) -> tuple[int | None, str | None]:
    """A count: tokens may carry k/M (8k = 8192); TP, PP and block size are plain numbers."""
    if name in _TOKEN_FIELDS:
        fallback = _("Enter a whole number of tokens, e.g. %(example)s.") % {"example": "8192, 8k"}
    else:
        fallback = _("Enter a whole number, e.g. %(example)s.") % {"example": "2"}
    if text.lstrip().startswith("-"):
        return None, _range(lo, hi, "", _)
    try:
        if name in _TOKEN_FIELDS:
            value = read_tokens(text)
        else:
            number = read_number(text)
            if number != int(number) or "%" in text:
                return None, fallback
            value = int(number)
    except QuantityError as error:
        return None, quantity_message(error, _, fallback)
    if not lo <= value <= hi:
        return None, _range(lo, hi, "", _)
    return value, None


def _parse_mix(text: str, _: Gettext) -> tuple[list[dict[str, int]] | None, str | None]:
    items = [part.strip() for part in re.split(r"[,;\n]+", text)]
    items = [item for item in items if item]
    if not items:
        return None, None
    if len(items) > MAX_REQUEST_ENTRIES:
        return None, _("At most %(n)s entries.") % {"n": MAX_REQUEST_ENTRIES}
    mix: list[dict[str, int]] = []
    for item in items:
        parts = _MIX_SPLIT.split(item)
        try:
            if len(parts) > 2 or not all(parts):
                raise QuantityError("not_a_number", item)
            tokens = read_tokens(parts[0])
            count = read_tokens(parts[1]) if len(parts) == 2 else 1
        except QuantityError:
            return None, _("Cannot read %(item)s: write tokens × count, e.g. 8192x10, 2048x30.") % {
                "item": repr(item[:40])
            }
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
        value = json.loads(text, parse_constant=json_constant)
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
            number, error = _parse_int(name, values[name], lo, hi, _)
            if error:
                state.add(name, FieldMessage(error))
            else:
                body[name] = number
    for name, api_name in _GIB_FIELDS.items():
        if values.get(name):
            fallback = _("Enter a size, e.g. %(example)s.") % {"example": "48, 48GiB, 80GB"}
            try:
                if values[name].lstrip().startswith("-"):
                    raise QuantityError("too_large", values[name])
                size = read_size(values[name], default_unit="GiB")
            except QuantityError as exc:
                if exc.code == "too_large":
                    state.add(
                        name,
                        FieldMessage(
                            _("Enter GiB from 0 to %(hi)s.") % {"hi": f"{MAX_BYTES // GiB:,}"}
                        ),
                    )
                else:
                    state.add(name, FieldMessage(quantity_message(exc, _, fallback)))
                continue
            if not 0 <= size <= MAX_BYTES:
                state.add(
                    name,
                    FieldMessage(
                        _("Enter GiB from 0 to %(hi)s.") % {"hi": f"{MAX_BYTES // GiB:,}"}
                    ),
                )
            else:
                body[api_name] = size
    if values.get("bandwidth_tbps"):
        hi_tbps = MAX_BANDWIDTH_BYTES_PER_S / TB
        try:
            rate = read_rate(values["bandwidth_tbps"], default_unit="TB/s")
        except QuantityError as exc:
            fallback = _("Enter a number, e.g. %(example)s.") % {"example": "3.35"}
            state.add("bandwidth_tbps", FieldMessage(quantity_message(exc, _, fallback)))
        else:
            if not 0 < rate <= MAX_BANDWIDTH_BYTES_PER_S:
                message = _("Enter TB/s above 0 and at most %(hi)s.") % {"hi": f"{hi_tbps:,.0f}"}
                state.add("bandwidth_tbps", FieldMessage(message))
            else:
                body["bandwidth_bytes_per_s"] = rate
    if values.get("gpu_memory_utilization"):
        try:
            util = read_number(values["gpu_memory_utilization"])
        except QuantityError as exc:
            fallback = _("Enter a fraction above 0 and at most 1, e.g. 0.9.")
            state.add("gpu_memory_utilization", FieldMessage(quantity_message(exc, _, fallback)))
        else:
            if not 0 < util <= 1:
                message = _("Enter a fraction above 0 and at most 1, e.g. 0.9.")
                state.add("gpu_memory_utilization", FieldMessage(message))
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


def core_message(
    error: PlanError, problem: FieldProblem, _: Gettext, *, has_config: bool = True
) -> FieldMessage:
    """A core error as a field message: a lead in the user's language, the core's detail.

    A config error names the config field it is about (the core's `msg` starts after it); an
    unknown catalog id points at what a person on the page can do, not at the API. A model
    chosen by id (nothing pasted) is never called "this config.json"."""
    head = str(problem.loc[0]) if problem.loc else ""
    if isinstance(error, ModelConfigError) and not has_config and head == "model":
        return core_detail(_("This value cannot be planned."), problem.message, _)
    if isinstance(error, ModelConfigError):
        inner = dotted(problem.loc[1:]) if head == "model" else ""
        return core_detail(_("This config.json cannot be used:"), problem.message, _, inner)
    if isinstance(error, UnknownIdError | HubUnavailableError):
        if head == "model":
            near = getattr(error, "suggestions", ())
            lead = _("Not in the catalog: pick a model from the list, or paste its config.json.")
            hint = did_you_mean(near)
            return core_detail(lead, hint, _) if isinstance(hint, Message) else FieldMessage(lead)
        if head == "gpu":
            return FieldMessage(_("Not in the catalog: pick a GPU from the list."))
        return core_detail(_("Not found."), problem.message, _)
    return core_detail(_("This value cannot be planned."), problem.message, _)


def _budget_above_memory(body: Mapping[str, Any], state: FormState, _: Gettext) -> None:
    """A per-GPU KV budget larger than the GPU itself is a typo, not a plan."""
    budget, gpu = body.get("kv_budget_bytes"), body.get("gpu")
    if not isinstance(budget, int) or not isinstance(gpu, str):
        return
    try:
        entry = get_gpu(gpu)
    except PlanError:
        return  # the core names the unknown GPU
    if budget > entry.usable_memory_bytes:
        state.add(
            "kv_budget_gib",
            FieldMessage(
                _("More than the %(gpu)s has (%(memory)s GiB): the budget is per GPU.")
                % {"gpu": entry.id, "memory": f"{entry.usable_memory_bytes / GiB:,.1f}"}
            ),
        )


def _validate(body: dict[str, Any], state: FormState, _: Gettext) -> PlanRequest | None:
    try:
        return PlanRequest.model_validate(body)
    except ValidationError as error:
        for item in error.errors(include_input=False):
            loc = tuple(part if isinstance(part, int) else str(part) for part in item["loc"])
            name = form_field(loc, has_config=state.has_config)
            if name not in state.errors:
                kind = str(item.get("type", ""))
                if kind in ERROR_TEMPLATES:  # a validator's own registered message
                    coded = Message(kind, dict(item.get("ctx") or {}))
                    state.add(name, core_detail(_pydantic_text(item, _), coded, _))
                else:
                    state.add(name, FieldMessage(_pydantic_text(item, _), item.get("msg")))
        return None


def parse(values: Mapping[str, str], _: Gettext) -> FormState:
    """Validate the form; `state.request` is set only when every field is usable.

    With mistakes, `state.partial` is the request from the usable fields alone, so the page
    can ask the planner about those too and show every error at once."""
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
    _budget_above_memory(body, state, _)
    if not state.errors:
        state.request = _validate(body, state, _)
    elif "model" in body:
        state.partial = _validate(body, state, _)
    return state
