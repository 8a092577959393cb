"""The page's form: raw strings in, a `PlanRequest` (or errors keyed by form field) out.

Form fields are the API's field names, except where a unit makes the form friendlier:
`kv_budget_gib` and `weights_gib` (GiB, 2^30 B), `bandwidth_tbps` (decimal TB/s), `requests`
as text (`8192x10, 2048x30`: tokens × count) and `model_config` (a pasted config.json, POST only).
Every value goes through `PlanRequest` afterwards, exactly like API input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_args
from urllib.parse import parse_qsl, urlencode

from pydantic import ValidationError

from planner.core.config_fields import json_constant
from planner.core.errors import (
    ERROR_TEMPLATES,
    FieldProblem,
    Message,
    ModelConfigError,
    PlanError,
    UnknownIdError,
    dotted,
)
from planner.core.schema import (
    ENGINES,
    MAMBA_SSM_DTYPES,
    MAX_BANDWIDTH_BYTES_PER_S,
    MAX_BYTES,
    MAX_COUNT,
    MAX_MAMBA_CACHE_SLOTS,
    MAX_MAMBA_FULL_MEMORY_RATIO,
    MAX_PARALLEL,
    MAX_REQUEST_ENTRIES,
    MAX_TOKENS,
    PlanRequest,
)
from planner.core.speculative_schema import MTP_METHOD_ALIASES, SpeculativeMethod
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
    "engine_version",
    "kv_cache_dtype",
    "context_tokens",
    "requests",
    "prefix_tokens",
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
    "speculative_method",
    "speculative_model",
    "speculative_tokens",
    "context_length",
    "chunked_prefill_size",
    "cuda_graph_max_bs",
    "max_total_tokens",
    "swa_full_tokens_ratio",
    "mamba_full_memory_ratio",
    "max_mamba_cache_size",
    "mamba_ssm_dtype",
    "data_parallel_size",
    "enable_dp_attention",
)
FORM_FIELDS: tuple[str, ...] = (*QUERY_FIELDS, "model_config")
# Query parameters that are not questions: the launch link, and the last answer that worked
# (kept on the page while a field holds a mistake).
PAGE_PARAMS: tuple[str, ...] = ("launch", "last")
# SGLang's own flags: shown when SGLang is the engine (or one of them is set).
SGLANG_FIELDS: tuple[str, ...] = (
    "context_length",
    "chunked_prefill_size",
    "cuda_graph_max_bs",
    "max_total_tokens",
    "swa_full_tokens_ratio",
    "mamba_full_memory_ratio",
    "max_mamba_cache_size",
    "mamba_ssm_dtype",
    "data_parallel_size",
    "enable_dp_attention",
)
SPECULATIVE_FIELDS: tuple[str, ...] = (
    "speculative_method",
    "speculative_model",
    "speculative_tokens",
)
# vLLM's --speculative-config methods (the schema's list; the older MTP aliases left out).
SPECULATIVE_METHODS: tuple[str, ...] = tuple(
    m for m in get_args(SpeculativeMethod) if m not in MTP_METHOD_ALIASES
)
_SWITCH_VALUES: dict[str, bool] = {
    "true": True,
    "on": True,
    "1": True,
    "false": False,
    "off": False,
    "0": False,
}
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
    *SPECULATIVE_FIELDS,
)

_INT_FIELDS: dict[str, tuple[int, int]] = {
    "context_tokens": (1, MAX_TOKENS),
    "tensor_parallel_size": (1, MAX_PARALLEL),
    "pipeline_parallel_size": (1, MAX_PARALLEL),
    "block_size": (1, 1 << 16),
    "max_num_batched_tokens": (1, MAX_TOKENS),
    "max_num_seqs": (1, MAX_COUNT),
    "prefix_tokens": (1, MAX_TOKENS),
    "speculative_tokens": (1, 64),
    "context_length": (1, MAX_TOKENS),
    "chunked_prefill_size": (1, MAX_TOKENS),
    "cuda_graph_max_bs": (1, 1 << 16),
    "max_total_tokens": (1, MAX_TOKENS),
    "data_parallel_size": (1, MAX_PARALLEL),
    "max_mamba_cache_size": (1, MAX_MAMBA_CACHE_SLOTS),
}
# Token counts accept k and M (8k = 8192), as the chart ticks print them.
_TOKEN_FIELDS = frozenset(
    {
        "context_tokens",
        "max_num_batched_tokens",
        "prefix_tokens",
        "context_length",
        "chunked_prefill_size",
        "max_total_tokens",
    }
)

_GIB_FIELDS: dict[str, str] = {"kv_budget_gib": "kv_budget_bytes", "weights_gib": "weights_bytes"}
# API field → form field, for errors the core or pydantic report.
_API_TO_FORM: dict[str, str] = {
    "kv_budget_bytes": "kv_budget_gib",
    "weights_bytes": "weights_gib",
    "bandwidth_bytes_per_s": "bandwidth_tbps",
    "shared_prefix_tokens": "prefix_tokens",
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


def canonical_query(values: Mapping[str, str], *, with_last: bool = False) -> str:
    """The shortest query that asks the same: non-empty, non-default fields in a fixed order;
    `with_last` adds the last answer that worked, where it is another question."""
    pairs = [(n, _given(values, n)) for n in QUERY_FIELDS if _given(values, n)]
    query = urlencode(pairs, safe="/")
    last = values.get("last", "")
    if with_last and last and last != query:
        pairs.append(("last", last))
    return urlencode(pairs, safe="/")


# A last answer's query is a canonical query: short, but a long mix can make it long.
MAX_LAST_CHARS = 4096


def raw_values(source: Mapping[str, Any], *, allow_config: bool) -> dict[str, str]:
    """The known fields as stripped strings (last value wins; files and unknown keys ignored),
    and `last` (the query of the last answer that worked) when it is one."""
    names = FORM_FIELDS if allow_config else QUERY_FIELDS
    out: dict[str, str] = {}
    for name in names:
        value = source.get(name)
        if isinstance(value, str):
            out[name] = value if name == "model_config" else value.strip()
    last = source.get("last")
    if isinstance(last, str) and last.strip() and len(last) <= MAX_LAST_CHARS:
        out["last"] = last.strip()
    return out


def last_values(values: Mapping[str, str]) -> dict[str, str] | None:
    """The fields of the last answer that worked (`last`), with the pasted config, if any."""
    last = values.get("last")
    if not last:
        return None
    try:
        pairs = parse_qsl(last, max_num_fields=2 * len(QUERY_FIELDS))
    except ValueError:
        return None
    out = raw_values(dict(pairs), allow_config=False)
    out.pop("last", None)
    if values.get("model_config", "").strip():
        out["model_config"] = values["model_config"]
    return out if is_question(out) else None


def unknown_params(names: Iterable[str]) -> list[str]:
    """Query parameters the page would otherwise drop without a word (e.g. a misspelt field)."""
    known = {*QUERY_FIELDS, *PAGE_PARAMS}
    return sorted({name for name in names if name not in known})


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
    for name in ("gpu_memory_utilization", "swa_full_tokens_ratio"):
        if values.get(name):
            message = _("Enter a fraction above 0 and at most 1, e.g. 0.9.")
            try:
                fraction = read_number(values[name])
            except QuantityError as exc:
                state.add(name, FieldMessage(quantity_message(exc, _, message)))
            else:
                if not 0 < fraction <= 1:
                    state.add(name, FieldMessage(message))
                else:
                    body[name] = fraction
    if values.get("mamba_full_memory_ratio"):
        hi_ratio = MAX_MAMBA_FULL_MEMORY_RATIO
        message = _("Enter a number above 0 and at most %(hi)s, e.g. %(example)s.") % {
            "hi": f"{hi_ratio:,g}",
            "example": "0.9",
        }
        try:
            ratio = read_number(values["mamba_full_memory_ratio"])
        except QuantityError as exc:
            state.add("mamba_full_memory_ratio", FieldMessage(quantity_message(exc, _, message)))
        else:
            if not 0 < ratio <= hi_ratio or "%" in values["mamba_full_memory_ratio"]:
                state.add("mamba_full_memory_ratio", FieldMessage(message))
            else:
                body["mamba_full_memory_ratio"] = ratio
    return body


def _texts(values: Mapping[str, str], state: FormState, _: Gettext) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for name in ("model", "kv_cache_dtype", "gpu", "calibration_id", "engine_version"):
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
    switch = values.get("enable_dp_attention", "").lower()
    if switch:
        if switch in _SWITCH_VALUES:
            body["enable_dp_attention"] = _SWITCH_VALUES[switch]
        else:
            state.add("enable_dp_attention", FieldMessage(_("Choose on or off.")))
    ssm_dtype = values.get("mamba_ssm_dtype")
    if ssm_dtype:
        if ssm_dtype in MAMBA_SSM_DTYPES:
            body["mamba_ssm_dtype"] = ssm_dtype
        else:
            message = _("Choose one of: %(list)s.") % {"list": ", ".join(MAMBA_SSM_DTYPES)}
            state.add("mamba_ssm_dtype", FieldMessage(message))
    method = values.get("speculative_method")
    if method and method not in SPECULATIVE_METHODS:
        state.add(
            "speculative_method",
            FieldMessage(_("Choose one of: %(list)s.") % {"list": ", ".join(SPECULATIVE_METHODS)}),
        )
    draft = values.get("speculative_model", "")
    if len(draft) > MAX_TEXT_CHARS:
        state.add("speculative_model", FieldMessage(_("Too long.")))
    return body


def _assemble(
    numbers: dict[str, Any], values: Mapping[str, str], state: FormState, _: Gettext
) -> None:
    """The form's parts of API fields: the shared prefix is one prefix across the mix,
    the speculative fields make `speculative_config`."""
    prefix = numbers.pop("prefix_tokens", None)
    tokens = numbers.pop("speculative_tokens", None)
    if prefix is not None:
        if "requests" in numbers:
            numbers["shared_prefix_tokens"] = prefix  # one prefix across the entries (--prefix)
        elif "requests" not in state.errors:
            message = _("A shared prefix needs a request mix: the requests that share it.")
            state.add("prefix_tokens", FieldMessage(message))
    method = values.get("speculative_method")
    draft = values.get("speculative_model")
    if method in SPECULATIVE_METHODS:
        spec: dict[str, Any] = {"method": method}
        if draft:
            spec["model"] = draft
        if tokens is not None:
            spec["num_speculative_tokens"] = tokens
        numbers["speculative_config"] = spec
    elif not method and (draft or tokens is not None):
        message = _("Choose the speculative method that uses this draft.")
        state.add("speculative_method", FieldMessage(message))


def form_field(loc: tuple[str | int, ...], *, has_config: bool) -> str:
    """The form field an API error location points at; `""` for the form as a whole."""
    if not loc:
        return ""
    head = str(loc[0])
    if head == "model":
        return "model_config" if has_config else "model"
    if head == "speculative_config":
        part = str(loc[1]) if len(loc) > 1 else ""
        return {"model": "speculative_model", "num_speculative_tokens": "speculative_tokens"}.get(
            part, "speculative_method"
        )
    if head == "requests" and "prefix_tokens" in map(str, loc):
        return "prefix_tokens"
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
        # The catalog's nearest ids, as the CLI gives them ("Did you mean: H200-141GB?").
        near = tuple(getattr(error, "suggestions", ()))
        hint = (" " + _("Did you mean: %(ids)s?") % {"ids": ", ".join(near)}) if near else ""
        if head == "model":
            return FieldMessage(
                _("Not in the catalog: pick a model from the list, or paste its config.json.")
                + hint
            )
        if head == "gpu":
            return FieldMessage(_("Not in the catalog: pick a GPU from the list.") + hint)
        if head == "speculative_config":
            return FieldMessage(_("Not in the catalog: the draft needs a catalog id.") + hint)
        return core_detail(_("Not found.") + hint, problem.message, _)
    return core_detail(_("This value cannot be planned."), problem.message, _)


def _validate(body: dict[str, Any], state: FormState, _: Gettext) -> PlanRequest | None:
    try:
        return PlanRequest.model_validate(body)
    except ValidationError as error:
        for item in error.errors(include_input=False):
            loc = tuple(part if isinstance(part, int) else str(part) for part in item["loc"])
            name = form_field(loc, has_config=state.has_config)
            if name == "requests" and "prefix_tokens" in item.get("msg", ""):
                name = "prefix_tokens"  # the mix entry's own check names the shared prefix
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
    _assemble(body, values, state, _)
    if state.has_config:
        config, error = _parse_config(values["model_config"], _)
        if error:
            state.add("model_config", FieldMessage(error))
        else:
            body["model"] = config
    elif "model" not in body and "model" not in state.errors:
        state.add("model", FieldMessage(_("Choose a model from the list, or paste a config.json.")))
    if not state.errors:
        state.request = _validate(body, state, _)
    elif "model" in body:
        state.partial = _validate(body, state, _)
    return state
