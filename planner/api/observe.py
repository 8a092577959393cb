"""Per-request observation: request id, access log line, metrics. A pure ASGI middleware.

The request id comes from `X-Request-ID` when it is a sane token (else a fresh one), is echoed on
the response, and tags every log line of the request. Health probes and scrapes are neither
logged nor counted: they would drown the signal (research C.1).
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from planner.api.metrics import Metrics
from planner.logs import request_id_var

access_log = logging.getLogger("planner.access")

_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
UNMATCHED_ROUTE = "<unmatched>"


def route_template(scope: Scope) -> str:
    """The matched route's path template (`/api/v1/models/{model_id:path}`), never the raw path."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) and path else UNMATCHED_ROUTE


def _incoming_request_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"x-request-id":
            text = value.decode("latin-1")
            return text if _REQUEST_ID.fullmatch(text) else None
    return None


class ObserveMiddleware:
    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _incoming_request_id(scope) or uuid.uuid4().hex
        # Exception handlers outside this middleware read it from request.state.
        scope.setdefault("state", {})["request_id"] = request_id
        token = request_id_var.set(request_id)
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [
                    (n, v) for n, v in message.get("headers", []) if n.lower() != b"x-request-id"
                ]
                headers.append((b"x-request-id", request_id.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - started
            path = scope.get("path", "")
            if path not in QUIET_PATHS:
                route = route_template(scope)
                method = scope.get("method", "")
                self.metrics.observe_request(method, route, status, seconds)
                access_log.info(
                    "request",
                    extra={
                        "method": method,
                        "route": route,
                        "path": path,
                        "status": status,
                        "duration_ms": round(seconds * 1000, 3),
                    },
                )
            request_id_var.reset(token)
