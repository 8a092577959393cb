"""Per-request observation: request id, access log line, metrics, and the security headers
(`planner.api.security`), in one pure ASGI layer with one `send` wrapper per request.

The request id comes from `X-Request-ID` when it is a sane token (else a fresh one), is echoed on
the response, and tags every log line of the request. Health probes and scrapes are neither
logged nor counted: they would drown the signal (research C.1).
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Iterable

from starlette.requests import ClientDisconnect
from starlette.routing import BaseRoute, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from planner.api.metrics import Metrics
from planner.api.security import ENCODED_HEADERS
from planner.logs import request_id_var

access_log = logging.getLogger("planner.access")

_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
UNMATCHED_ROUTE = "<unmatched>"
# Response headers this layer owns: the app's own are dropped (uvicorn runs with
# server_header=False; an app layer might add one) and the request id is set here.
_DROPPED = frozenset({b"x-request-id", b"server"})


class RouteTemplates:
    """Route object → full path template (`/api/v1/models/{model_id:path}`), never a raw path.

    FastAPI ≥ 0.165 keeps included routers nested, so `scope["route"].path` lacks the prefix;
    the app registers each router with the prefix it was included under.
    """

    def __init__(self) -> None:
        self._by_route: dict[int, str] = {}
        self._methods: list[tuple[re.Pattern[str], frozenset[str]]] = []

    def add_router(self, prefix: str, routes: Iterable[BaseRoute]) -> None:
        for route in routes:
            path = getattr(route, "path", None)
            if isinstance(path, str):
                self._by_route[id(route)] = prefix + path
                methods = getattr(route, "methods", None) or ()
                self._methods.append((compile_path(prefix + path)[0], frozenset(methods)))

    def allowed_methods(self, path: str) -> list[str]:
        """Every method some route serves at `path`. Starlette's 405 lists only the first
        matching route's, which is wrong when GET and POST live in different routes."""
        found: set[str] = set()
        for pattern, methods in self._methods:
            if pattern.match(path):
                found |= methods
        return sorted(found)

    def add_mount(self, path: str, app: object) -> None:
        self._by_route[id(app)] = path + "/{path}"

    def of(self, scope: Scope) -> str:
        found = self._by_route.get(id(scope.get("route")))
        if found is None:  # mounts set `endpoint` to the mounted app, not `route`
            found = self._by_route.get(id(scope.get("endpoint")))
        return found or UNMATCHED_ROUTE


def _incoming_request_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"x-request-id":
            text = value.decode("latin-1")
            return text if _REQUEST_ID.fullmatch(text) else None
    return None


class ObserveMiddleware:
    def __init__(self, app: ASGIApp, *, metrics: Metrics, templates: RouteTemplates) -> None:
        self.app = app
        self.metrics = metrics
        self.templates = templates

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # 32 hex digits, as uuid4().hex gave, at a quarter of its cost.
        request_id = _incoming_request_id(scope) or secrets.token_hex(16)
        # Exception handlers outside this middleware read it from request.state.
        scope.setdefault("state", {})["request_id"] = request_id
        token = request_id_var.set(request_id)
        status = 500
        disconnected = False
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                given = message.get("headers", [])
                # A security header the route already set (a page's own CSP) is left alone.
                present = {n.lower() for n, _ in given}
                headers = [(n, v) for n, v in given if n.lower() not in _DROPPED]
                headers.extend(item for item in ENCODED_HEADERS if item[0] not in present)
                headers.append((b"x-request-id", request_id.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except ClientDisconnect:
            # The client went away mid-request (an aborted upload): nothing to answer, nothing
            # wrong with the server. One INFO line and a counter, not an ERROR traceback.
            status = 499  # nginx's "client closed request", for the log line and metrics only
            disconnected = True
            self.metrics.count_disconnect()
        finally:
            seconds = time.perf_counter() - started
            path = scope.get("path", "")
            if path not in QUIET_PATHS:
                route = self.templates.of(scope)
                method = scope.get("method", "")
                self.metrics.observe_request(method, route, status, seconds)
                if access_log.isEnabledFor(logging.INFO):
                    # The record is made directly: `info()` would first walk the stack for a
                    # caller that the JSON line never shows (a sixth of the line's cost).
                    access_log.handle(
                        access_log.makeRecord(
                            access_log.name,
                            logging.INFO,
                            __file__,
                            0,
                            "client disconnected" if disconnected else "request",
                            (),
                            None,
                            extra={
                                "method": method,
                                "route": route,
                                "path": path,
                                "status": status,
                                "duration_ms": round(seconds * 1000, 3),
                            },
                        )
                    )
            request_id_var.reset(token)
