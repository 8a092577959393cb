"""Connection-level limits for `kvplan serve`: uvicorn's httptools protocol with bounds.

uvicorn bounds neither the request head nor the time to send it (its h11 protocol has
`h11_max_incomplete_event_size`, but h11 is pure Python and several times slower). This
subclass of uvicorn's own `HttpToolsProtocol` (passed as `http=`) adds, per connection:

- head size: bytes received before the headers complete are counted before they reach the
  parser; past KVPLAN_MAX_HEADER_BYTES the connection gets 431 (414 when the URL alone is over)
  and is closed, so a 128 MiB header costs one read, not seconds of parsing;
- head time: the request line and headers must arrive within KVPLAN_HEADER_TIMEOUT_SECONDS of
  the connection opening (or of the previous response), else 408 and close (slowloris);
- connections: past KVPLAN_MAX_CONNECTIONS (kept below the fd limit) a new connection is closed
  at once; between 7/8 of it and the cap only `/healthz`, `/readyz` and `/metrics` are served,
  so probes still reach a saturated server while it says 503 to everything else;
- uvicorn's own 400 for malformed HTTP is problem+json like every other error;
- `GET /healthz` is answered here, from the protocol callback on the event loop, without an
  ASGI task: liveness means "this process's loop turns", and under load an app request waits
  behind every request already queued on the loop (the answer is the app's, byte for byte:
  `{"status":"ok"}` with the security headers).

Idle keep-alive connections are closed by uvicorn's `timeout_keep_alive`
(KVPLAN_KEEP_ALIVE_SECONDS).
The body's own time limit is in the app (`planner.api.limits`, 408).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

PROBE_PATHS = frozenset({b"/healthz", b"/readyz", b"/metrics"})
_HEALTHZ_BODY = b'{"status":"ok"}'


def _healthz_head(keep_alive: bool) -> bytes:
    from planner.api.security import SECURITY_HEADERS

    lines = [
        "HTTP/1.1 200 OK",
        "content-type: application/json",
        f"content-length: {len(_HEALTHZ_BODY)}",
        *(f"{name.lower()}: {value}" for name, value in SECURITY_HEADERS.items()),
    ]
    if not keep_alive:
        lines.append("connection: close")
    return ("\r\n".join(lines) + "\r\n").encode("latin-1")


_HEALTHZ_KEEP_ALIVE: bytes | None = None
_HEALTHZ_CLOSE: bytes | None = None


class ServerLimits:
    """The limits every connection of this process applies, and what readiness reads."""

    def __init__(
        self,
        *,
        max_header_bytes: int = 64 << 10,
        header_timeout_seconds: float = 10.0,
        max_connections: int = 2048,
    ) -> None:
        self.max_header_bytes = max_header_bytes
        self.header_timeout_seconds = header_timeout_seconds
        self.max_connections = max_connections
        self.open_connections = 0
        self.refused = {"header_too_large": 0, "header_timeout": 0, "connections": 0, "bad": 0}

    @property
    def soft_limit(self) -> int:
        return max(1, self.max_connections * 7 // 8)

    @property
    def saturated(self) -> bool:
        return self.open_connections >= self.soft_limit


LIMITS = ServerLimits()


def configure(**kwargs: Any) -> ServerLimits:
    """Set this process's limits (called by `kvplan serve` before uvicorn starts)."""
    global LIMITS
    LIMITS = ServerLimits(**kwargs)
    return LIMITS


def _problem_bytes(status: int, title: str, detail: str, slug: str, loc: str) -> bytes:
    body = json.dumps(
        {
            "type": f"urn:kvplan:problem:{slug}",
            "title": title,
            "status": status,
            "detail": detail,
            "errors": [{"loc": [loc], "field": loc, "msg": detail}],
        }
    ).encode()
    head = (
        f"HTTP/1.1 {status} {title}\r\n"
        "content-type: application/problem+json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode("ascii")
    return head + body


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._limits = LIMITS
        self._head_bytes = 0
        self._in_head = True
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_since = 0.0
        self._counted = False
        self._answered_here = False

    # -- connection ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        limits = self._limits
        if limits.open_connections >= limits.max_connections:
            limits.refused["connections"] += 1
            transport.abort()  # no fd is held: the cap is what keeps /healthz reachable
            return
        limits.open_connections += 1
        self._counted = True
        super().connection_made(transport)
        self._head_since = self.loop.time()
        self._head_timer = self.loop.call_later(limits.header_timeout_seconds, self._check_head)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._counted:
            return
        self._counted = False
        self._limits.open_connections -= 1
        self._cancel_head_timer()
        super().connection_lost(exc)

    # -- request head ----------------------------------------------------------------------

    # One timer per connection, re-armed only when it fires: a request costs a float store,
    # not a timer (uvloop timers are cheap, but not free at thousands of requests a second).
    def _check_head(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        timeout = self._limits.header_timeout_seconds
        waiting = self._in_head and (self.cycle is None or self.cycle.response_complete)
        elapsed = self.loop.time() - self._head_since
        if waiting and elapsed >= timeout:
            self._head_timed_out()
            return
        self._head_timer = self.loop.call_later(
            timeout - elapsed if waiting else timeout, self._check_head
        )

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _refuse(self, status: int, title: str, detail: str, slug: str, loc: str) -> None:
        self._cancel_head_timer()
        if not self.transport.is_closing():
            self.transport.write(_problem_bytes(status, title, detail, slug, loc))
            self.transport.close()

    def _head_timed_out(self) -> None:
        self._limits.refused["header_timeout"] += 1
        self._refuse(
            408,
            "Request Timeout",
            "the request line and headers did not arrive within "
            f"{self._limits.header_timeout_seconds:g} s (KVPLAN_HEADER_TIMEOUT_SECONDS)",
            "request-timeout",
            "headers",
        )

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
            limit = self._limits.max_header_bytes
            # A head this large cannot be valid whatever follows it in the same read.
            if self._head_bytes > limit + 64 * 1024:
                self._too_large()
                return
        super().data_received(data)
        if self._in_head and self._head_bytes > self._limits.max_header_bytes:
            self._too_large()

    def _too_large(self) -> None:
        self._limits.refused["header_too_large"] += 1
        limit = self._limits.max_header_bytes
        url_only = self._in_head and len(getattr(self, "url", b"")) > limit
        if url_only:
            self._refuse(
                414,
                "URI Too Long",
                f"the URL is over {limit} bytes (KVPLAN_MAX_HEADER_BYTES); send the question "
                "as a POST body",
                "uri-too-long",
                "url",
            )
        else:
            self._refuse(
                431,
                "Request Header Fields Too Large",
                f"the request line and headers are over {limit} bytes "
                "(KVPLAN_MAX_HEADER_BYTES); send fewer or shorter headers",
                "headers-too-large",
                "headers",
            )

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._answered_here = False
        self._in_head = True
        self._head_bytes = 0

    def on_headers_complete(self) -> None:
        self._in_head = False
        head = len(self.url) + sum(len(n) + len(v) + 4 for n, v in self.headers)
        if head > self._limits.max_header_bytes:
            self._in_head = True  # report it as the head's problem
            self._too_large()
            return
        limits = self._limits
        if limits.saturated and self.url.split(b"?", 1)[0] not in PROBE_PATHS:
            limits.refused["connections"] += 1
            self._refuse(
                503,
                "Service Unavailable",
                f"this server holds {limits.open_connections} connections, near its limit of "
                f"{limits.max_connections} (KVPLAN_MAX_CONNECTIONS); retry shortly",
                "busy",
                "request",
            )
            return
        if self._is_healthz():
            self._answer_healthz()
            return
        super().on_headers_complete()

    def _is_healthz(self) -> bool:
        if self.url != b"/healthz" or self.parser.get_method() not in (b"GET", b"HEAD"):
            return False
        # A request pipelined behind one still being answered keeps its order: the app's path.
        return self.cycle is None or self.cycle.response_complete

    def _answer_healthz(self) -> None:
        global _HEALTHZ_KEEP_ALIVE, _HEALTHZ_CLOSE
        keep_alive = self.parser.get_http_version() != "1.0" and self.parser.should_keep_alive()
        if keep_alive:
            head = _HEALTHZ_KEEP_ALIVE = _HEALTHZ_KEEP_ALIVE or _healthz_head(True)
        else:
            head = _HEALTHZ_CLOSE = _HEALTHZ_CLOSE or _healthz_head(False)
        self._answered_here = True
        request_id = uuid.uuid4().hex.encode("ascii")
        body = b"" if self.parser.get_method() == b"HEAD" else _HEALTHZ_BODY
        self.transport.write(head + b"x-request-id: " + request_id + b"\r\n\r\n" + body)
        self.server_state.total_requests += 1
        if not keep_alive:
            self.transport.close()
            return
        self._in_head = True
        self._head_bytes = 0
        self._head_since = self.loop.time()
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )

    def on_body(self, body: bytes) -> None:
        if not self._answered_here:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._answered_here:
            super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # The next request's head has its own time limit (uvicorn's keep-alive timer also runs).
        self._in_head = True
        self._head_bytes = 0
        self._head_since = self.loop.time()

    def send_400_response(self, msg: str) -> None:
        self._limits.refused["bad"] += 1
        self._refuse(
            400,
            "Bad Request",
            f"malformed HTTP request ({msg.rstrip('.')}); send HTTP/1.1",
            "malformed-http",
            "request",
        )


__all__ = ["LIMITS", "PROBE_PATHS", "BoundedHttpToolsProtocol", "ServerLimits", "configure"]
