"""HTML routes: `GET /` and `POST /` render the form and the answer; `POST /lang` switches the
language (a cookie) and shows the same question again.

Form mistakes are HTML, not problem+json: the form comes back with each message next to its
field, with status 200 like every rendered page. (A 4xx document or fetch is logged by browsers
as a console error, and live update asks on every keystroke; the API keeps 422 for tooling.)
A POST without a pasted config answers 303 to the equivalent `GET /?…`, so every catalog answer
ends at a shareable URL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup
from pydantic import ValidationError

from planner.api.jobs import CalibrationSnapshot, CarriedPlanError
from planner.api.plan import calibration_for
from planner.api.problems import ProblemException
from planner.api.work import budget_of, run_job
from planner.catalog import list_gpus, list_models
from planner.core.engines.registry import (
    engine_class,
    engine_labels,
    engine_names,
    flag_engines,
    get_engine,
    serving_engines,
)
from planner.core.errors import FieldError, Message, PlanError
from planner.core.inputs import CalibrationLike
from planner.core.recommend_schema import Recommendation, RecommendRequest
from planner.core.schema import ENGINES, MAMBA_SSM_DTYPES, Plan, PlanRequest
from planner.cost import page_cost, plan_cost, recommend_cost
from planner.service import plan, recommend
from planner.web import form
from planner.web.figures import Figure, capacity_figure, decode_figure, memory_figure
from planner.web.i18n import (
    AUTONYMS,
    COOKIE_MAX_AGE_SECONDS,
    COOKIE_NAME,
    HTML_LANG,
    LANGUAGES,
    Numbers,
    ShownNote,
    message_text,
    negotiate,
    show_note,
    translations,
)
from planner.web.paths import templates_dir
from planner.web.step import step_summary, term_labels
from planner.web.view import (
    BlockMath,
    FormulaShown,
    MemoryView,
    block_math,
    engine_log_differs,
    formula_shown,
    memory_view,
    plans_by_context,
    sweep_contexts,
    symbolic_formula,
)

router = APIRouter(include_in_schema=False)

# Names, labels and flags come from the engines registry (the only list of them).
ENGINE_LABELS: dict[str, str] = engine_labels()
# The flag that caps running requests, by engine (shown when it binds before memory).
CAP_FLAGS: dict[str, str] = {name: get_engine(name).running_cap_flag for name in engine_names()}
_MAX_FORM_FIELDS = 64


@cache
def environment(lang: str) -> Environment:
    """One Jinja environment per language (gettext is installed on the environment).

    `autoescape=True` for every template whatever its name: `select_autoescape` would skip
    names not ending in .html.
    """
    env = Environment(
        loader=FileSystemLoader(templates_dir()),
        autoescape=True,
        undefined=StrictUndefined,
        extensions=["jinja2.ext.i18n"],
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.install_gettext_translations(translations(lang), newstyle=True)  # type: ignore[attr-defined]
    env.globals["strong"] = lambda text: Markup("<strong>%s</strong>") % text
    return env


def render_page(
    template: str, lang: str, context: Mapping[str, Any], *, cache_control: str
) -> HTMLResponse:
    """Render one of the site's pages: `context` plus what base.html needs for the language
    toggle, with the headers every page sends."""
    toggle = {
        "lang": lang,
        "html_lang": HTML_LANG[lang],
        "languages": LANGUAGES,
        "autonyms": AUTONYMS,
        "html_langs": HTML_LANG,
    }
    html = environment(lang).get_template(template).render({**toggle, **context})
    headers = {
        "Content-Language": HTML_LANG[lang],
        "Vary": "Accept-Language, Cookie",
        "Cache-Control": cache_control,
    }
    return HTMLResponse(html, headers=headers)


def field_labels(_: form.Gettext) -> dict[str, str]:
    return {
        "": _("Form"),
        "model": _("Catalog model"),
        "model_config": _("Or paste a config.json"),
        "engine": _("Serving engine"),
        "kv_cache_dtype": _("KV cache dtype"),
        "context_tokens": _("Context length (tokens per request)"),
        "requests": _("Or a request mix"),
        "kv_budget_gib": _("KV cache budget per GPU (GiB)"),
        "gpu": _("GPU"),
        "gpu_memory_utilization": _("GPU memory utilization"),
        "tensor_parallel_size": _("Tensor parallel size (TP)"),
        "pipeline_parallel_size": _("Pipeline parallel size (PP)"),
        "block_size": _("Block size (tokens)"),
        "max_num_batched_tokens": _("Max batched tokens"),
        "max_num_seqs": _("Max running requests"),
        "weights_gib": _("Weights, whole model (GiB)"),
        "bandwidth_tbps": _("Memory bandwidth (TB/s)"),
        "calibration_id": _("Calibration id"),
        "engine_version": _("Engine release"),
        "prefix_tokens": _("Shared prefix (tokens)"),
        "speculative_method": _("Speculative decoding method"),
        "speculative_model": _("Draft model"),
        "speculative_tokens": _("Draft tokens per step"),
        "context_length": _("SGLang context length (--context-length)"),
        "chunked_prefill_size": _("Chunked prefill size (--chunked-prefill-size)"),
        "cuda_graph_max_bs": _("CUDA graph max batch (--cuda-graph-max-bs)"),
        "max_total_tokens": _("Max total tokens (--max-total-tokens)"),
        "swa_full_tokens_ratio": _("Sliding-window pool ratio (--swa-full-tokens-ratio)"),
        "mamba_full_memory_ratio": _("State pool ratio (--mamba-full-memory-ratio)"),
        "max_mamba_cache_size": _("State pool slots (--max-mamba-cache-size)"),
        "mamba_ssm_dtype": _("Recurrent state dtype (--mamba-ssm-dtype)"),
        "data_parallel_size": _("Data parallel size (--dp-size)"),
        "enable_dp_attention": _("DP attention (--enable-dp-attention)"),
    }


def releases_text() -> str:
    """`vLLM 0.9–0.33, SGLang 0.5, …`: the releases each engine's rules cover (an en dash for
    the range, which reads the same in every language of the page)."""
    return ", ".join(
        f"{engine_class(name).label} {engine_class(name).releases.describe().replace(' to ', '–')}"
        for name in engine_names()
    )


def release_options(engine: str | None) -> list[str]:
    """Releases the chosen engine's rules cover, newest first: the default, then each minor
    line (any patch release of a line is accepted too)."""
    cls = engine_class(engine if engine in engine_names() else form.DEFAULTS["engine"])
    default = get_engine(cls.name).version_text
    return list(dict.fromkeys([default, *reversed(cls.releases.minors())]))


def field_hints(_: form.Gettext) -> dict[str, str]:
    return {
        "model": _("Type to search the catalog, e.g. meta-llama/Llama-3.1-8B."),
        "model_config": _(
            "The model's config.json from Hugging Face, as published; it replaces the model above."
        ),
        "engine": _("Whose allocator rules the numbers follow."),
        "kv_cache_dtype": _("auto = the model's own dtype; fp8 takes half the bytes of bf16."),
        "context_tokens": _(
            "Prompt plus generated tokens, e.g. 8192 or 8k (k = 1024). Empty: the model's maximum."
        ),
        "requests": _("Tokens × count, comma-separated, e.g. 8192x10, 2048x30."),
        "kv_budget_gib": _(
            "GiB unless you write a unit: 48, 48 GiB, 80GB (1 GiB = 2^30 bytes). Given, it "
            "replaces the GPU's memory; empty: derived from the GPU."
        ),
        "gpu": _(
            "Gives the bandwidth, and, without a budget, the memory (less weights and a reserve)."
        ),
        "gpu_memory_utilization": _(
            "The memory fraction, e.g. 0.9 or 90%: vLLM's of the whole GPU, SGLang's "
            "mem_fraction_static, TensorRT-LLM's free_gpu_memory_fraction; empty: the engine's "
            "default."
        ),
        "tensor_parallel_size": _("GPUs that split each layer's heads; empty: 1."),
        "pipeline_parallel_size": _("GPUs that split the layers into stages; empty: 1."),
        "block_size": _("Tokens per KV block; empty: the engine's default."),
        "max_num_batched_tokens": _("Used by sliding-window admission; empty: the default."),
        "max_num_seqs": _(
            "The engine's cap on requests running at once (vLLM --max-num-seqs, SGLang "
            "--max-running-requests, TensorRT-LLM max_batch_size); empty: its default."
        ),
        "weights_gib": _(
            "GiB unless you write a unit; 0 means KV cache only; empty: from the model."
        ),
        "bandwidth_tbps": _(
            "TB/s unless you write a unit (1 TB/s = 10^12 bytes per second); overrides the "
            "GPU's datasheet."
        ),
        "calibration_id": _("The id `kvplan probe` printed when it stored a GPU measurement."),
        "engine_version": _(
            "Whose release's rules apply, e.g. 0.19 or 0.10.1 (%(releases)s); empty: the newest "
            "verified."
        )
        % {"releases": releases_text()},
        "prefix_tokens": _(
            "Leading tokens every request of the mix shares (a system prompt), e.g. 1k; "
            "engines with prefix caching store them once."
        ),
        "speculative_method": _("vLLM --speculative-config; empty: none."),
        "speculative_model": _(
            "The draft's catalog id (eagle, eagle3, dflash, draft_model); mtp uses the model's "
            "own layers, ngram none."
        ),
        "speculative_tokens": _(
            "num_speculative_tokens, 1 to 64; empty for mtp: the model's own count."
        ),
        "context_length": _("The model length SGLang serves; empty: the model's own."),
        "chunked_prefill_size": _(
            "Tokens; empty: by GPU memory (it sets the automatic mem_fraction_static)."
        ),
        "cuda_graph_max_bs": _(
            "Requests; empty: by GPU memory and TP (it sets the automatic mem_fraction_static)."
        ),
        "max_total_tokens": _("Caps the token pool below what memory allows; empty: no cap."),
        "swa_full_tokens_ratio": _(
            "Sliding-window pool tokens per full-pool token, above 0 and at most 1; empty: 0.8."
        ),
        "mamba_full_memory_ratio": _(
            "Mamba / linear-attention state pool bytes per KV-pool byte; empty: 0.9."
        ),
        "max_mamba_cache_size": _(
            "State pool slots, in place of the ratio; empty: from the ratio."
        ),
        "mamba_ssm_dtype": _(
            "The SSM state's dtype; empty: the config's mamba_ssm_dtype, else float32."
        ),
        "data_parallel_size": _("Replicas of the model; empty: 1."),
        "enable_dp_attention": _(
            "Each replica's attention runs at TP ÷ data parallel size; empty: off."
        ),
    }


@dataclass(frozen=True, slots=True)
class Answer:
    plan: Plan
    memory: MemoryView | None
    figures: dict[str, Figure]
    blocks: BlockMath | None
    log_differs: bool
    symbolic: str | None
    notes: tuple[ShownNote, ...]
    formula: FormulaShown | None = None  # the bytes-per-token formula, its remark translated


def compute(request: PlanRequest, calibration: CalibrationLike | None, lang: str) -> Answer:
    """The plan plus everything the page derives from it (runs in a worker thread)."""
    result = plan(request, calibration=calibration)
    _ = translations(lang).gettext
    fmt = Numbers(lang)
    figures: dict[str, Figure] = {}
    memory = memory_view(result)
    if memory is not None:
        figures["memory"] = memory_figure(memory, fmt, _)
    plans: dict[int, Plan] = {}
    if result.capacity is not None:
        current = result.capacity.context_tokens
        contexts = sorted({*sweep_contexts(result), current})
        plans = plans_by_context(request, contexts, calibration)
        points = [(c, p.capacity.max_requests) for c, p in plans.items() if p.capacity]
        cap_fig = capacity_figure(sorted(points), current, fmt, _)
        if cap_fig is not None:
            figures["capacity"] = cap_fig
    dec_fig = decode_figure(result, plans, fmt, _)
    if dec_fig is not None:
        figures["decode"] = dec_fig
    return Answer(
        result,
        memory,
        figures,
        block_math(result),
        engine_log_differs(result),
        symbolic_formula(result),
        tuple(show_note(n, lang) for n in result.notes_detail),
        formula_shown(result, _),
    )


async def answer_for(
    request: Request, question: PlanRequest, calibration: CalibrationLike | None, lang: str
) -> Answer:
    """`compute` under the API's admission and work limits (`planner.api.work`): over budget
    is a form error on the model, heavy work runs in the worker pool under its deadline."""
    cost = page_cost(question)
    reason = budget_of(request.app).refusal(cost)
    if reason is not None:
        raise FieldError(("model",), "page.too_expensive", reason=reason)
    portable = CalibrationSnapshot.of(calibration) if calibration is not None else None
    try:
        found = await run_job(request, cost, compute_or_error, question, portable, lang)
    except ProblemException as exc:  # busy or past the deadline: said next to the form
        raise PlanError("page.busy", reason=exc.problem.detail) from None
    if isinstance(found, CarriedPlanError):
        raise found.rebuild()
    return found


def compute_or_error(
    question: PlanRequest, calibration: CalibrationLike | None, lang: str
) -> Answer | CarriedPlanError:
    """`compute`, for a worker process: a core error comes back as a value, not raised."""
    try:
        return compute(question, calibration, lang)
    except PlanError as exc:
        return CarriedPlanError.of(exc)


def dtype_names(engine: str | None) -> tuple[str, ...]:
    """The KV cache dtypes the chosen engine offers (the registry's list), so the form never
    offers a setup the engine cannot run."""
    name = engine if engine in engine_names() else form.DEFAULTS["engine"]
    return get_engine(name).kv_cache_dtype_names()


def _count(request: Request, outcome: str) -> None:
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.count_plan(outcome)


def _add_core_errors(state: form.FormState, error: PlanError, _: form.Gettext) -> None:
    """The planner's objections, each next to its field; a field already marked keeps the
    form's own message (the planner saw its default, not what was typed)."""
    marked = set(state.errors)
    for problem in error.problems or [error.whole()]:
        name = form.form_field(problem.loc, has_config=state.has_config)
        if name not in marked:
            state.add(name, form.core_message(error, problem, _, has_config=state.has_config))


def _check_partial(request: PlanRequest) -> PlanError | None:
    try:
        plan(request)
    except PlanError as error:
        return error
    return None


# Settings the recommender has no field for: an answer that sets one is not the setup a
# recommended launch command would run, so the page offers none.
_NOT_RECOMMENDABLE: tuple[str, ...] = ("engine_version", "speculative_config", *form.SGLANG_FIELDS)


def launchable(request: PlanRequest, result: Plan) -> bool:
    """A catalog GPU whose memory gives the budget, a serving engine and a request that runs:
    recommend can say how (it sizes from the GPU; a budget typed in has no launch flag)."""
    cap = result.capacity
    return (
        isinstance(request.gpu, str)
        and request.engine in serving_engines()
        and cap is not None
        and cap.budget.source == "gpu"
        and cap.max_running_requests > 0
        and all(getattr(request, name) is None for name in _NOT_RECOMMENDABLE)
    )


def launch_for(request: PlanRequest, result: Plan) -> Recommendation | None:
    """The engine's launch flags for this answer (`POST /api/v1/recommend`): the same model,
    GPUs, engine and settings, holding the requests that run at this context. Asked for by a
    link, not on every answer: a recommendation searches many plans."""
    cap = result.capacity
    if cap is None or not launchable(request, result):
        return None
    body: dict[str, Any] = {
        "model": request.model,
        "gpu": request.gpu,
        "gpu_count": request.tensor_parallel_size * request.pipeline_parallel_size,
        "engine": request.engine,
        "max_model_len": cap.context_tokens,
        "concurrency": result.totals.requests if cap.workload_fits else cap.max_running_requests,
        "allow_fp8_kv": False,
    }
    if request.kv_cache_dtype != "auto":
        body["kv_cache_dtype"] = request.kv_cache_dtype
    for name in (
        "gpu_memory_utilization",
        "block_size",
        "max_num_batched_tokens",
        "weights_bytes",
        "reserve_bytes",
    ):
        if getattr(request, name) is not None:
            body[name] = getattr(request, name)
    try:
        return recommend(RecommendRequest.model_validate(body))
    except (PlanError, ValidationError):
        return None


def launch_why(found: Recommendation | None, _: form.Gettext) -> tuple[str, str | None] | None:
    """Why the recommender found no launch, in the page's language where the catalog has its
    code: (text, None), else (the English, "en")."""
    if found is None or not found.binding_detail:
        return None
    if found.binding_detail_code:
        coded = Message.from_json(found.binding_detail_code, found.binding_detail_params)
        shown = message_text(coded, _)
        if shown is not None:
            return shown, None
    return found.binding_detail, "en"


def launch_job(question: PlanRequest, result: Plan) -> Recommendation | CarriedPlanError | None:
    """`launch_for`, for a worker process: a core error comes back as a value."""
    try:
        return launch_for(question, result)
    except PlanError as exc:
        return CarriedPlanError.of(exc)


async def _launch_plan(
    request: Request, question: PlanRequest, result: Plan
) -> Recommendation | None:
    """The launch flags under the API's limits: a recommendation searches many plans, so it
    runs in the worker pool, and one over the cost budget is not offered."""
    cost = recommend_cost(
        question.model,
        gpu_count=question.tensor_parallel_size * question.pipeline_parallel_size,
        mix_classes=1,
        dtypes=1,
    )
    if budget_of(request.app).refusal(cost) is not None:
        return None
    try:
        found = await run_job(request, cost, launch_job, question, result, inline=False)
    except ProblemException:  # busy or past the deadline: the answer stands without flags
        return None
    if isinstance(found, CarriedPlanError):
        raise found.rebuild()
    return found


async def _partial_errors(request: Request, partial: PlanRequest) -> PlanError | None:
    """What the planner says about the fields that parsed, under the same limits as an
    answer (skipped when it would cost more than the budget: the form errors stand)."""
    cost = plan_cost(partial)
    if budget_of(request.app).refusal(cost) is not None:
        return None
    try:
        found = await run_job(request, cost, partial_job, partial)
    except ProblemException:
        return None
    return found.rebuild() if found is not None else None


def partial_job(partial: PlanRequest) -> CarriedPlanError | None:
    found = _check_partial(partial)
    return CarriedPlanError.of(found) if found is not None else None


async def render(
    request: Request,
    values: Mapping[str, str],
    lang: str,
    *,
    launch: bool = False,
    unknown: Sequence[str] = (),
) -> HTMLResponse:
    _ = translations(lang).gettext
    state = form.parse(values, _) if form.is_question(values) else form.FormState(dict(values))
    for name in unknown:
        # Never answer another question than the one asked: a parameter the page cannot
        # honour is a mistake to fix, not something to drop.
        message = _(
            "This page has no parameter %(name)s: remove it from the URL, or use one of the "
            "form's fields."
        )
        state.add("", form.FieldMessage(message % {"name": repr(name[:40])}))
    if unknown and state.request is not None:
        state.partial, state.request = state.request, None
    answer: Answer | None = None
    stale = False
    launch_plan: Recommendation | None = None
    if state.request is not None:
        try:
            calibration = await calibration_for(state.request, request)
            answer = await answer_for(request, state.request, calibration, lang)
        except PlanError as error:
            _add_core_errors(state, error, _)
        if answer is not None and launch:
            launch_plan = await _launch_plan(request, state.request, answer.plan)
        _count(request, "ok" if answer else "unplannable")
    elif state.submitted:
        if state.partial is not None:
            # Every mistake at once: what the planner says about the fields that did parse.
            found = await _partial_errors(request, state.partial)
            if found is not None:
                _add_core_errors(state, found, _)
        _count(request, "invalid")
    last = form.last_values(state.values) if answer is None and state.errors else None
    last_state = form.parse(last, _) if last is not None else None
    if last_state is not None and last_state.request is not None:
        # A mistake keeps the last answer that worked on the page, marked stale (Enter and the
        # language switch included, not only live update): the error shows next to its field.
        try:
            calibration = await calibration_for(last_state.request, request)
            answer = await answer_for(request, last_state.request, calibration, lang)
            stale = True
        except PlanError:
            last_state = None
    shown_state = last_state if stale and last_state is not None else state
    last_query = shown_state.share_query() if answer is not None else state.values.get("last", "")
    context: dict[str, Any] = {
        "fmt": Numbers(lang),
        "step_summary": lambda floor, e: step_summary(floor, e, _),
        "step_labels": term_labels(_),
        "values": state.values,
        "errors": state.errors,
        "labels": field_labels(_),
        "hints": field_hints(_),
        "advanced_fields": form.ADVANCED_FIELDS,
        "advanced_open": any(
            state.values.get(name) or name in state.errors for name in form.ADVANCED_FIELDS
        ),
        "models": [m.id for m in list_models()],
        "engine_options": [(e, ENGINE_LABELS.get(e, e)) for e in ENGINES],
        "engine_labels": ENGINE_LABELS,
        "cap_flags": CAP_FLAGS,
        "dtype_options": [(d, d) for d in dtype_names(state.values.get("engine"))],
        "gpu_options": [("", _("None")), *((g.id, g.id) for g in list_gpus())],
        "answer": answer,
        "stale": stale,
        "last_query": last_query,
        "share_url": (
            "/?" + shown_state.share_query() if answer and not shown_state.has_config else None
        ),
        "launch": launch_plan,
        "launch_why": launch_why(launch_plan, _),
        "can_launch": bool(
            answer
            and shown_state.request
            and not shown_state.has_config
            and launchable(shown_state.request, answer.plan)
        ),
        "from_config": shown_state.has_config,
        "release_options": release_options(state.values.get("engine")),
        "speculative_options": [
            ("", _("None")),
            *((m, m) for m in form.SPECULATIVE_METHODS),
        ],
        "switch_options": [("", _("Default")), ("true", _("On")), ("false", _("Off"))],
        "ssm_dtype_options": [("", _("Default")), *((d, d) for d in MAMBA_SSM_DTYPES)],
        "sglang_fields": form.SGLANG_FIELDS,
        "sglang_open": state.values.get("engine") in flag_engines()
        or any(state.values.get(n) or n in state.errors for n in form.SGLANG_FIELDS),
    }
    # A pasted config may describe an unreleased model: keep it out of caches.
    cache_control = "no-store" if state.has_config else "no-cache"
    return render_page("page.html", lang, context, cache_control=cache_control)


def language_of(request: Request) -> str:
    return negotiate(request.cookies.get(COOKIE_NAME), request.headers.get("accept-language"))


def toggled_language(request: Request, choice: object) -> str:
    """The language a toggle button asked for, else the request's own."""
    return choice if isinstance(choice, str) and choice in LANGUAGES else language_of(request)


def remember_language(response: Response, request: Request, lang: str) -> Response:
    """The toggle's cookie: the choice outlives the page (and beats Accept-Language)."""
    response.set_cookie(
        COOKIE_NAME,
        lang,
        max_age=COOKIE_MAX_AGE_SECONDS,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
    )
    return response


def _redirect(
    values: Mapping[str, str], unknown: Sequence[tuple[str, str]] = ()
) -> RedirectResponse:
    query = form.canonical_query(values, with_last=True)
    if unknown:  # kept, so the answer's page can say it cannot honour them
        query = "&".join(q for q in (query, urlencode(list(unknown))) if q)
    return RedirectResponse("/?" + query if query else "/", status_code=303)


@router.get("/", response_class=HTMLResponse)
async def page(request: Request) -> Response:
    """The form; with query parameters, the answer too (a shareable URL)."""
    items = request.query_params.multi_items()
    unknown = form.unknown_params(name for name, _value in items)
    if any(
        (name in form.QUERY_FIELDS or name == "last") and not value.strip() for name, value in items
    ):
        # A GET form submission lists empty fields too: answer at the tidy URL.
        strange = [(n, v) for n, v in items if n in unknown]
        return _redirect(form.raw_values(request.query_params, allow_config=False), strange)
    values = form.raw_values(request.query_params, allow_config=False)
    launch = request.query_params.get("launch") == "1"
    return await render(request, values, language_of(request), launch=launch, unknown=unknown)


async def _form_values(request: Request) -> tuple[dict[str, str], str | None]:
    data = await request.form(max_files=0, max_fields=_MAX_FORM_FIELDS)
    lang = data.get("lang")
    return form.raw_values(data, allow_config=True), lang if isinstance(lang, str) else None


@router.post("/", response_class=HTMLResponse)
async def submit(request: Request) -> Response:
    """The form's submission: a pasted config is answered here, the rest at `GET /?…`."""
    values, _lang = await _form_values(request)
    if not values.get("model_config", "").strip():
        return _redirect(values)
    return await render(request, values, language_of(request))


@router.post("/lang", response_class=HTMLResponse)
async def switch_language(request: Request) -> Response:
    """The toggle: remember the language, then show the same question in it."""
    values, choice = await _form_values(request)
    lang = toggled_language(request, choice)
    response: Response
    if values.get("model_config", "").strip():
        response = await render(request, values, lang)
    else:
        response = _redirect(values)
    return remember_language(response, request, lang)
