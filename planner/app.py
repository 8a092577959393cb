"""The ASGI app: `create_app(settings)` builds one; nothing is created at import time.

Layers, outermost first: observation (request id, access log, metrics, security headers) →
timeout → body limit → in-flight limit (counted once the body is in) → FastAPI (problem+json
handlers, routers). uvicorn runs `create_app_from_env` as a factory, so each worker builds its
own app from the environment.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.routing import BaseRoute

from planner import __version__
from planner.api import calibrations as calibrations_api
from planner.api import catalog as catalog_api
from planner.api import docs as docs_api
from planner.api import lab as lab_api
from planner.api import ops as ops_api
from planner.api import plan as plan_api
from planner.api import recommend as recommend_api
from planner.api import reconcile as reconcile_api
from planner.api import sweep as sweep_api
from planner.api.limits import BodyLimitMiddleware, InFlightLimitMiddleware, TimeoutMiddleware
from planner.api.metrics import Metrics
from planner.api.observe import ObserveMiddleware, RouteTemplates
from planner.api.openapi import install_openapi
from planner.api.problems import install_problem_handlers, problem_responses
from planner.api.schemas import Problem, SweepRequest
from planner.api.work import pool_of
from planner.api.workers import WorkerPool
from planner.core.recommend_schema import RecommendRequest
from planner.core.reconcile_schema import ReconcileRequest
from planner.core.schema import PlanRequest
from planner.probe import CalibrationIn, ProbeRequest
from planner.resolve.settings import HubSettings
from planner.settings import Settings, load_hub_settings, load_settings
from planner.web import explain as web_explain
from planner.web import page as web_page
from planner.web import reconcile as web_reconcile

logger = logging.getLogger("planner.app")

API_PREFIX = "/api/v1"

# ---- Routers under /api/v1 -----------------------------------------------------------------
# Add routers here as their modules land; each is mounted under /api/v1 and its routes get
# metric labels by template. `calibrations` reads `app.state.settings.admin_token` and
# `app.state.store` (opened by the lifespan).
V1_ROUTERS: tuple[APIRouter, ...] = (
    plan_api.router,
    sweep_api.router,
    catalog_api.router,
    lab_api.router,
    calibrations_api.router,
    reconcile_api.router,
    recommend_api.router,
)
# Unversioned routers (ops endpoints, /docs; the HTML page router goes here).
ROOT_ROUTERS: tuple[APIRouter, ...] = (
    ops_api.router,
    docs_api.router,
    web_page.router,
    web_reconcile.router,
    web_explain.router,
)
# Matched first (plans, GPU and model lookups, probes); the rest keep the order above.
_ASKED_MOST: tuple[APIRouter, ...] = (plan_api.router, catalog_api.router, ops_api.router)
# ---------------------------------------------------------------------------------------------

# Statuses any request can meet: wrong method, body over the limit, invalid parameters.
# Any guarded request can also time out (408 body too slow, 503) or find the server full (503).
_COMMON_ERRORS = problem_responses(405, 408, 413, 422, 503)


def static_dir() -> Path:
    """`static/` of a source checkout, else the copy the wheel ships as `planner/_static`."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "static", here / "_static"):
        if candidate.is_dir():
            return candidate
    raise RuntimeError("static/ not found next to the planner package; reinstall kvplan")


def _open_store(settings: Settings) -> object | None:
    """The calibration store, when this build has one (`planner.store`); errors fail start-up."""
    if importlib.util.find_spec("planner.store") is None:
        return None
    store_module = importlib.import_module("planner.store")
    url = settings.database_url.get_secret_value() if settings.database_url else None
    return store_module.open_store(settings.data_dir, url)  # type: ignore[no-any-return]


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    logger.info("starting", extra={"config": settings.public_summary()})
    store = _open_store(settings)
    app.state.store = store
    if app.state.hub_settings.enabled and not app.state.hub_settings.offline:
        # Imported before serving: an import in a lookup's thread holds the GIL (and the loop)
        # for the half second huggingface_hub takes to load.
        importlib.import_module("planner.resolve.hub")
    pool = pool_of(app)
    if app.state.prestart_workers:
        # Started beside serving: the first heavy request need not wait for the forkserver.
        threading.Thread(target=pool.start, name="kvplan-pool-start", daemon=True).start()
    try:
        yield
    finally:
        app.state.store = None
        if app.state.owns_work_pool:
            pool.close()
            app.state.work_pool = None
        close = getattr(store, "close", None)
        if callable(close):
            close()


def create_app(
    settings: Settings | None = None,
    hub_settings: HubSettings | None = None,
    *,
    work_pool: WorkerPool | None = None,
) -> FastAPI:
    """The app. `work_pool`: a running worker pool this app shares with others (the test
    suite's apps share one, so each test does not start and stop interpreters); its owner
    starts and closes it, and its size and limits are its own, not `settings`'."""
    settings = settings if settings is not None else load_settings()
    # Read and checked now, with the rest of the configuration (a bad value stops start-up).
    hub_settings = hub_settings if hub_settings is not None else load_hub_settings()
    metrics = Metrics()
    app = FastAPI(
        title="kvplan",
        version=__version__,
        description="KV-cache capacity planner for LLM inference. Errors are "
        "application/problem+json (RFC 9457). Units are in the field names: `_bytes` are "
        "integer bytes (1 GiB = 2^30 B), `_tokens` tokens, `_seconds` seconds, "
        "`_bytes_per_s` bytes per second (1 TB/s = 10^12 B/s).",
        docs_url=None,
        redoc_url=None,
        openapi_url=f"{API_PREFIX}/openapi.json",
        lifespan=_lifespan,
        responses=_COMMON_ERRORS,
    )
    app.state.settings = settings
    app.state.hub_settings = hub_settings
    app.state.metrics = metrics
    app.state.store = None
    app.state.work_pool = work_pool
    app.state.owns_work_pool = work_pool is None
    app.state.prestart_workers = False
    # /readyz requires the store once this build has one (opened by the lifespan).
    app.state.store_required = importlib.util.find_spec("planner.store") is not None

    install_problem_handlers(app)
    templates = RouteTemplates()
    app.state.route_templates = templates
    # No intermediate /api/v1 router, and the most-asked routers first: FastAPI tries included
    # routers one by one, level by level, and routing was a third of a trivial route's cost.
    # The two groups' paths never overlap (/api/v1/... and the rest), so the order changes no
    # match; the OpenAPI document keeps the declared order (ROOT_ROUTERS, then V1_ROUTERS).
    declared = [("", r) for r in ROOT_ROUTERS] + [(API_PREFIX, r) for r in V1_ROUTERS]
    rank = {id(r): i for i, r in enumerate(_ASKED_MOST)}
    head = len(app.router.routes)
    included: dict[int, list[BaseRoute]] = {}
    for prefix, router in sorted(declared, key=lambda pr: rank.get(id(pr[1]), len(rank))):
        start = len(app.router.routes)
        app.include_router(router, prefix=prefix)
        included[id(router)] = app.router.routes[start:]
        templates.add_router(prefix, router.routes)
    tail = len(app.router.routes)
    static_files = StaticFiles(directory=static_dir())
    app.mount("/static", static_files, name="static")
    templates.add_mount("/static", static_files)
    documented = [
        *app.router.routes[:head],
        *(route for _, router in declared for route in included[id(router)]),
        *app.router.routes[tail:],
    ]

    # add_middleware wraps: the last added is the outermost. The in-flight slot is innermost:
    # it reads the body first, under the body's size limit and time limit outside it.
    app.add_middleware(InFlightLimitMiddleware, max_in_flight=settings.max_concurrent_requests)
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(
        TimeoutMiddleware,
        timeout_seconds=settings.request_timeout_seconds,
        body_timeout_seconds=settings.body_timeout_seconds,
    )
    # Observation and the security headers are one layer (planner.api.observe).
    app.add_middleware(ObserveMiddleware, metrics=metrics, templates=templates)

    install_openapi(
        app,
        [
            (PlanRequest, "validation"),
            (SweepRequest, "validation"),
            (ReconcileRequest, "validation"),
            (RecommendRequest, "validation"),
            # Admin bodies (`json_body` refs): without these the refs dangle (found by fuzzing).
            (CalibrationIn, "validation"),
            (ProbeRequest, "validation"),
            (Problem, "serialization"),
        ],
        routes=documented,
    )
    return app


def create_app_from_env() -> FastAPI:
    """uvicorn factory (`--factory planner.app:create_app_from_env`); starts the worker pool
    with the server rather than on the first heavy request."""
    settings = load_settings()
    from planner import server

    server.configure(
        max_header_bytes=settings.max_header_bytes,
        header_timeout_seconds=settings.header_timeout_seconds,
        max_connections=settings.effective_max_connections(),
    )
    app = create_app(settings)
    app.state.prestart_workers = True
    return app
