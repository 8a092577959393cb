"""`kvplan serve`: run the REST service and page with uvicorn.

Settings come from `KVPLAN_*`; flags override them. A bad setting exits 2 with a problem+json
on stderr naming the variable, before anything binds a port.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated

import typer

from planner.logs import logging_config
from planner.settings import SettingsError, load_hub_settings, load_settings

GRACEFUL_SHUTDOWN_SECONDS = 10
# The deployment shape is one process per container (deploy/k8s/): metrics live in each process's
# own registry, and the request, admin-rate, sweep and probe limits are per process.
WORKERS_WARNING = (
    "kvplan serve: warning: --workers {workers} starts {workers} processes that do not share "
    "state: each /metrics scrape shows one worker's counters, and the concurrency, admin-rate and "
    "probe limits apply per worker. The supported shape is one process per container; run more "
    "replicas instead (README, 'Running in a cluster').\n"
)


def serve(
    # Rich markup would swallow "[env …]" as a style tag: keep help text free of brackets.
    host: Annotated[
        str | None, typer.Option(help="Bind address (env KVPLAN_HOST; default 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="TCP port (env KVPLAN_PORT; default 8000).")
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            max=64,
            help="Worker processes. Keep 1 and scale with replicas: metrics, limits and the "
            "probe slot are per process.",
        ),
    ] = 1,
) -> None:
    """Serve the API, page, /docs and /metrics."""
    overrides: dict[str, object] = {}
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    try:
        settings = load_settings(**overrides)
        load_hub_settings()  # KVPLAN_HUB_* and HF_* fail here too, not at the first Hub id
    except SettingsError as exc:
        problem = {
            "type": "urn:kvplan:problem:invalid-settings",
            "title": "Invalid settings",
            "status": 2,
            "detail": str(exc),
        }
        sys.stderr.write(json.dumps(problem) + "\n")
        raise typer.Exit(2) from None

    if workers > 1:
        sys.stderr.write(WORKERS_WARNING.format(workers=workers))

    import uvicorn

    # Workers rebuild settings from the environment; keep the flags' values visible to them.
    os.environ["KVPLAN_HOST"] = settings.host
    os.environ["KVPLAN_PORT"] = str(settings.port)
    uvicorn.run(
        "planner.app:create_app_from_env",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=workers,
        log_config=logging_config(settings.log_level),
        log_level=settings.log_level,
        access_log=False,
        server_header=False,
        proxy_headers=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        # Head size and time, a connection cap below the fd limit (planner/server.py).
        http="planner.server:BoundedHttpToolsProtocol",
        timeout_keep_alive=settings.keep_alive_seconds,
        limit_concurrency=settings.effective_max_connections() + 1,
    )


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
