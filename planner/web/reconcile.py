"""The reconcile page: `GET /reconcile` (a paste box) and `POST /reconcile` (the log beside
kvplan's recomputation); `POST /reconcile/lang` switches the language and keeps the paste.

The pasted log is untrusted: it goes through the same bounded, linear-time parser as the API,
only matched figures are shown, and Jinja autoescapes everything. Form mistakes come back as
messages next to their fields with status 200, as on the main page.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from planner.api.jobs import CarriedPlanError
from planner.api.problems import ProblemException, field_of
from planner.api.work import run_job
from planner.catalog import list_gpus, list_models
from planner.core.config_fields import json_constant
from planner.core.engines import DEFAULT_ENGINE, engine_class, log_engines
from planner.core.errors import FieldProblem, Message, ModelConfigError, PlanError, UnknownIdError
from planner.core.logs import MAX_LOG_BYTES
from planner.core.reconcile import ENGINE_LABELS
from planner.core.reconcile_schema import ReconcileRequest, ReconcileResult
from planner.core.schema import PlanRequest
from planner.cost import Cost
from planner.resolve.errors import HubUnavailableError
from planner.service import plan, reconcile
from planner.web.form import FieldMessage, Gettext, core_detail, core_message
from planner.web.i18n import Numbers, message_text, show_note, translations
from planner.web.page import language_of, remember_language, render_page, toggled_language

router = APIRouter(include_in_schema=False)

FIELDS: tuple[str, ...] = (
    "log",
    "model",
    "model_config",
    "engine",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "kv_cache_dtype",
    "block_size",
    "gpu",
    "memory_fraction",
)
_INT_FIELDS = ("tensor_parallel_size", "pipeline_parallel_size", "block_size")
# Each log engine's memory-fraction setting, as the reconcile settings name it.
_FRACTION = {name: engine_class(name).fraction_setting for name in log_engines()}
_MAX_FORM_FIELDS = 32
_MAX_FIELD_CHARS = 256 * 1024


def labels(_: Gettext) -> dict[str, str]:
    return {
        "": _("Form"),
        "log": _("Engine start-up log"),
        "model": _("Catalog model"),
        "model_config": _("Or paste a config.json"),
        "engine": _("Engine that wrote the log"),
        "tensor_parallel_size": _("Tensor parallel size (TP)"),
        "pipeline_parallel_size": _("Pipeline parallel size (PP)"),
        "kv_cache_dtype": _("KV cache dtype"),
        "block_size": _("Block size (tokens)"),
        "gpu": _("GPU"),
        "memory_fraction": _("Memory fraction"),
    }


def hints(_: Gettext) -> dict[str, str]:
    return {
        "log": _(
            "Paste the lines the engine prints at start-up (vLLM, SGLang or TensorRT-LLM), "
            "up to 2 MiB. Only the KV-cache lines are read."
        ),
        "model": _("Empty: the model the log names, when the catalog has it."),
        "engine": _("Empty: detected from the log."),
        "tensor_parallel_size": _(
            "Settings the log does not print; empty: from the log, else the engine's default."
        ),
        "kv_cache_dtype": _("e.g. auto, fp8."),
        "gpu": _("Turns the learned figures into reserves for a plan."),
        "memory_fraction": _(
            "gpu_memory_utilization (vLLM), mem_fraction_static (SGLang) or "
            "free_gpu_memory_fraction (TensorRT-LLM)."
        ),
    }


def status_labels(_: Gettext) -> dict[str, str]:
    return {
        "equal": _("equal"),
        "consistent": _("consistent within rounding"),
        "different": _("different"),
        "not_recomputable": _("not recomputable"),
    }


def _form_field(loc: tuple[str | int, ...]) -> str:
    if not loc:
        return ""
    head = str(loc[0])
    if head == "settings" and len(loc) > 1:
        name = str(loc[1])
        if name in _FRACTION.values():
            return "memory_fraction"
        return name if name in FIELDS else ""
    if head == "model" and len(loc) > 1:
        return "model_config"
    return head if head in FIELDS else ""


def parse(
    values: Mapping[str, str], _: Gettext
) -> tuple[ReconcileRequest | None, dict[str, list[FieldMessage]]]:
    errors: dict[str, list[FieldMessage]] = {}

    def add(name: str, message: FieldMessage) -> None:
        errors.setdefault(name, []).append(message)

    body: dict[str, Any] = {"log": values.get("log", "")}
    settings: dict[str, Any] = {}
    engine = values.get("engine", "").strip()
    if engine:
        body["engine"] = engine
    for name in _INT_FIELDS:
        text = values.get(name, "").strip()
        if text:
            if not text.isdigit() or len(text) > 9:
                add(
                    name,
                    FieldMessage(_("Enter a whole number, e.g. %(example)s.") % {"example": "2"}),
                )
            else:
                settings[name] = int(text)
    fraction = values.get("memory_fraction", "").strip()
    if fraction:
        try:
            settings[_FRACTION.get(engine, _FRACTION[DEFAULT_ENGINE])] = float(fraction)
        except ValueError:
            add("memory_fraction", FieldMessage(_("Enter a fraction such as 0.9.")))
    for name in ("kv_cache_dtype", "gpu"):
        text = values.get(name, "").strip()
        if text:
            settings[name] = text
    body["settings"] = settings
    config_text = values.get("model_config", "").strip()
    if config_text:
        try:
            config = json.loads(config_text, parse_constant=json_constant)
        except ValueError as exc:
            add("model_config", FieldMessage(_("This is not valid JSON."), str(exc)))
        else:
            if isinstance(config, dict):
                body["model"] = config
            else:
                add("model_config", FieldMessage(_("Paste a JSON object (a config.json).")))
    elif values.get("model", "").strip():
        body["model"] = values["model"].strip()
    if errors:
        return None, errors
    try:
        return ReconcileRequest.model_validate(body), errors
    except ValidationError as exc:
        for item in exc.errors(include_input=False, include_url=False):
            loc = tuple(part for part in item["loc"] if isinstance(part, str | int))
            add(
                _form_field(loc),
                FieldMessage(_("This value cannot be used."), f"{field_of(loc)}: {item['msg']}"),
            )
        return None, errors


def _message(error: PlanError, problem: FieldProblem, _: Gettext) -> FieldMessage:
    """A core error next to its field: the main page's lead for a config or an unknown id, a
    log's own otherwise; the core's detail."""
    if isinstance(error, ModelConfigError | UnknownIdError | HubUnavailableError):
        return core_message(error, problem, _)
    return core_detail(_("This log cannot be reconciled as given."), problem.message, _)


def reasons_shown(result: ReconcileResult, _: Gettext) -> dict[int, tuple[str, str | None]]:
    """Each check's reason (by position) in the page's language where the catalog has its code:
    (text, None), else (the English, "en")."""
    out: dict[int, tuple[str, str | None]] = {}
    for i, check in enumerate(result.checks):
        if not check.reason:
            continue
        shown = None
        if check.reason_code:
            shown = message_text(Message.from_json(check.reason_code, check.reason_params), _)
        out[i] = (shown, None) if shown is not None else (check.reason, "en")
    return out


def derivation_shown(result: ReconcileResult, _: Gettext) -> list[tuple[str, str | None]]:
    """How the reserves were learned, line by line, in the page's language where it can."""
    r = result.reserves
    if r is None:
        return []
    if len(r.derivation_detail) != len(r.derivation):
        return [(line, "en") for line in r.derivation]
    out: list[tuple[str, str | None]] = []
    for line, detail in zip(r.derivation, r.derivation_detail, strict=True):
        shown = message_text(Message.from_json(detail.code, detail.params), _)
        out.append((shown, None) if shown is not None else (line, "en"))
    return out


def plan_link(result: ReconcileResult) -> str | None:
    """The main page asking the same deployment, with the KV budget the log reports."""
    req = result.plan_request
    if not req or not isinstance(req.get("model"), str) or result.reserves is None:
        return None
    budget = result.reserves.kv_budget_bytes
    if budget is None:
        return None
    query = {
        "model": req["model"],
        "engine": req["engine"],
        "kv_cache_dtype": req["kv_cache_dtype"],
        "kv_budget_gib": f"{budget / (1 << 30):.4f}".rstrip("0").rstrip("."),
        "tensor_parallel_size": str(req["tensor_parallel_size"]),
        "pipeline_parallel_size": str(req["pipeline_parallel_size"]),
        "block_size": str(req["block_size"]),
    }
    if "context_tokens" in req:
        query["context_tokens"] = str(req["context_tokens"])
    return "/?" + urlencode(query)


@dataclass(frozen=True, slots=True)
class Fit:
    """What the deployment the log describes holds: the planner's answer for its plan_request."""

    requests: int
    in_memory: int
    context_tokens: int


def fit_of(result: ReconcileResult) -> Fit | None:
    """Plan the log's own deployment (its learned budget, model and settings): the headline
    people grep the log for, "N requests of C tokens fit", from the core, not from the log."""
    body = result.plan_request
    if not body or "context_tokens" not in body or "kv_budget_bytes" not in body:
        return None
    try:
        answer = plan(PlanRequest.model_validate(body))
    except (PlanError, ValidationError):
        return None
    cap = answer.capacity
    if cap is None:
        return None
    return Fit(cap.max_running_requests, cap.max_requests, cap.context_tokens)


def _reconcile_and_fit(req: ReconcileRequest) -> tuple[ReconcileResult, Fit | None]:
    result = reconcile(req)
    return result, fit_of(result)


def reconcile_and_fit_job(
    req: ReconcileRequest,
) -> tuple[ReconcileResult, Fit | None] | CarriedPlanError:
    """`_reconcile_and_fit` for a worker process: a core error comes back as a value."""
    try:
        return _reconcile_and_fit(req)
    except PlanError as exc:
        return CarriedPlanError.of(exc)


def show(value: float | None, unit: str, fmt: Numbers) -> str:
    if value is None:
        return "—"
    if unit == "x":
        return fmt.dec(value) + "x"
    if unit == "GiB":
        return fmt.dec(value) + " GiB"
    if float(value).is_integer():
        return fmt.num(int(value))
    return fmt.dec(value, 4)


async def _reconciled(
    request: Request, req: ReconcileRequest
) -> tuple[ReconcileResult, Fit | None]:
    """The reconciliation and its fit in the API's worker pool, under its deadline
    (`planner.api.work`)."""
    cost = Cost(work_units=len(req.log), response_bytes=0, plans=1)
    try:
        found = await run_job(request, cost, reconcile_and_fit_job, req, inline=False)
    except ProblemException as exc:  # busy or past the deadline: said next to the form
        raise PlanError("page.busy", reason=exc.problem.detail) from None
    if isinstance(found, CarriedPlanError):
        raise found.rebuild()
    return found


async def render(
    request: Request, values: Mapping[str, str], lang: str, *, submitted: bool
) -> HTMLResponse:
    _ = translations(lang).gettext
    errors: dict[str, list[FieldMessage]] = {}
    result: ReconcileResult | None = None
    fit: Fit | None = None
    if submitted:
        req, errors = parse(values, _)
        if req is not None:
            try:
                result, fit = await _reconciled(request, req)
            except PlanError as error:
                for problem in error.problems or [error.whole()]:
                    errors.setdefault(_form_field(problem.loc), []).append(
                        _message(error, problem, _)
                    )
    if "\x00" in values.get("log", ""):
        # Never echo binary back into the page; the message says what was wrong with it.
        values = {**values, "log": ""}
    fmt = Numbers(lang)
    context: dict[str, Any] = {
        "lang_form": "reconcile-form",
        "lang_action": "/reconcile/lang",
        "fmt": fmt,
        "values": values,
        "errors": errors,
        "labels": labels(_),
        "hints": hints(_),
        "statuses": status_labels(_),
        "engine_options": [("", _("Detect")), *((e, ENGINE_LABELS[e]) for e in _FRACTION)],
        "gpu_options": [("", _("None")), *((g.id, g.id) for g in list_gpus())],
        "models": [m.id for m in list_models()],
        "result": result,
        "reasons": reasons_shown(result, _) if result else {},
        "derivation": derivation_shown(result, _) if result else [],
        "notes": [show_note(n, lang) for n in result.notes_detail] if result else [],
        "fit": fit,
        "show": lambda value, unit: show(value, unit, fmt),
        "plan_link": plan_link(result) if result else None,
        "max_log_mib": MAX_LOG_BYTES >> 20,
    }
    # A pasted log may name private hosts or models: keep it out of caches.
    return render_page("reconcile.html", lang, context, cache_control="no-store")


async def _form_values(request: Request) -> tuple[dict[str, str], str | None]:
    data = await request.form(max_files=0, max_fields=_MAX_FORM_FIELDS)
    out: dict[str, str] = {}
    for name in FIELDS:
        value = data.get(name)
        if isinstance(value, str):
            out[name] = value[: MAX_LOG_BYTES + 1] if name == "log" else value[:_MAX_FIELD_CHARS]
    lang = data.get("lang")
    return out, lang if isinstance(lang, str) else None


@router.get("/reconcile", response_class=HTMLResponse)
async def reconcile_page(request: Request) -> Response:
    return await render(request, {}, language_of(request), submitted=False)


@router.post("/reconcile", response_class=HTMLResponse)
async def reconcile_submit(request: Request) -> Response:
    values, _lang = await _form_values(request)
    return await render(request, values, language_of(request), submitted=True)


@router.post("/reconcile/lang", response_class=HTMLResponse)
async def reconcile_language(request: Request) -> Response:
    """The language toggle: remember the choice and show the same paste in it."""
    values, choice = await _form_values(request)
    lang = toggled_language(request, choice)
    response: Response
    if values.get("log", "").strip():
        response = await render(request, values, lang, submitted=True)
    else:
        response = RedirectResponse("/reconcile", status_code=303)
    return remember_language(response, request, lang)
