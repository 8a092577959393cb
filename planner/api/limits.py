"""Request limits: body size, in-flight requests, timeouts, admin rate, expensive sweeps.

Bodies over the limit get 413 problem+json, whether announced or streamed. uvicorn has no body
limit. A declared `Content-Length` over the limit is refused before the app
runs; a chunked or lying body is counted as it streams, and the read that crosses the limit
raises `BodyTooLarge`, answered here with 413 if the response has not started.

Also the process-wide guards (issue 7; defaults in `planner.settings`, all per process):
- `InFlightLimitMiddleware`: at most KVPLAN_MAX_CONCURRENT_REQUESTS requests in the app at once,
  the next gets 503 + `Retry-After: 1` (health, readiness and metrics are never refused); a
  request counts once its body has arrived, so slow uploads cannot take every slot;
- `TimeoutMiddleware`: KVPLAN_REQUEST_TIMEOUT_SECONDS per request (408 for a body still arriving,
  else 503); the probe has its own bound;
- `enforce_admin_rate`: per-client token bucket on admin routes, 429 + `Retry-After`;
- `big_sweep_slot`: sweeps over BIG_SWEEP_POINTS points share KVPLAN_MAX_CONCURRENT_BIG_SWEEPS
  slots, else 503 + `Retry-After`. The probe has its own one-per-process slot (calibrations).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import anyio
from fastapi import HTTPException, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from planner.api.problems import make_problem, problem_response

# Defaults of the KVPLAN_* limits (planner.settings); also used by apps built without them.
DEFAULT_MAX_CONCURRENT_REQUESTS = 64
DEFAULT_REQUEST_TIMEOUT_SECONDS = 30.0
DEFAULT_ADMIN_RATE_PER_MINUTE = 30
DEFAULT_ADMIN_RATE_BURST = 10
DEFAULT_BIG_SWEEP_SLOTS = 2


class BodyTooLarge(Exception):
    """The request body crossed the limit while streaming in."""


def too_large_response(limit_bytes: int) -> Response:
    return problem_response(
        make_problem(
            413,
            f"request body exceeds {limit_bytes} bytes; send a smaller body "
            "(the limit is KVPLAN_MAX_BODY_BYTES)",
            slug="body-too-large",
            title="Request body too large",
        ),
        headers={"Connection": "close"},
    )


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > limit:
                    await too_large_response(limit)(scope, receive, send)
                    return

        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if started:
                raise
            await too_large_response(limit)(scope, receive, send)


# ---- Process-wide guards (issue 7): in-flight cap, timeout, admin rate, expensive sweeps ----
#
# All of these are per process: with N replicas the service admits N times as much. That is the
# documented deployment (one uvicorn process per container, the orchestrator scales).

# Liveness, readiness and scrapes must answer under overload: a probe that fails because the
# process is busy would get a healthy pod killed, or take every replica out of rotation at once.
UNGUARDED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
# The probe is bounded by its own `max_seconds` (<= 120 s) and the one-probe-per-process slot.
UNTIMED_PATH_PREFIXES = ("/api/v1/probe",)
# Sweeps with more points than this take a slot of the big-sweep guard.
BIG_SWEEP_POINTS = 64
_RATE_MAX_CLIENTS = 10_000


def _busy_response(detail: str, *, slug: str, retry_after_seconds: int) -> Response:
    return problem_response(
        make_problem(503, detail, slug=slug, title="Server busy"),
        headers={"Retry-After": str(retry_after_seconds)},
    )


class InFlightLimitMiddleware:
    """At most `max_in_flight` requests inside the app at once; the next one gets 503 with
    `Retry-After: 1` at once, rather than a queue that would only add latency to every request.

    Unlike uvicorn's `--limit-concurrency`, this counts requests, not open connections (idle
    keep-alive connections do not use up the limit), and answers in problem+json.
    """

    def __init__(self, app: ASGIApp, *, max_in_flight: int) -> None:
        self.app = app
        self.max_in_flight = max_in_flight
        self.in_flight = 0  # one event loop per process: no lock needed

    @property
    def saturated(self) -> bool:
        return self.in_flight >= self.max_in_flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in UNGUARDED_PATHS:
            await self.app(scope, receive, send)
            return
        app = scope.get("app")
        if app is not None and getattr(app.state, "in_flight_guard", None) is not self:
            app.state.in_flight_guard = self  # read by /readyz
        if _has_body(scope):
            # The slot is taken once the body is in: a client trickling its body holds a
            # connection (bounded by KVPLAN_BODY_TIMEOUT_SECONDS and KVPLAN_MAX_BODY_BYTES,
            # applied outside this middleware), never a slot of the work.
            receive = await _buffered_body(receive)
        if self.in_flight >= self.max_in_flight:
            busy = _busy_response(
                f"this server is answering {self.max_in_flight} requests already; retry in 1 s "
                "(the limit is KVPLAN_MAX_CONCURRENT_REQUESTS)",
                slug="busy",
                retry_after_seconds=1,
            )
            await busy(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


async def _buffered_body(receive: Receive) -> Receive:
    """Read the whole body now; the returned `receive` replays it, then reads on."""
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            break

    async def replay() -> Message:
        if messages:
            return messages.pop(0)
        return await receive()

    return replay


def _has_body(scope: Scope) -> bool:
    """The head announces a body: a non-zero Content-Length, or any Transfer-Encoding."""
    for name, value in scope.get("headers", []):
        if name == b"transfer-encoding":
            return True
        if name == b"content-length":
            return value.strip() not in (b"0", b"")
    return False


class TimeoutMiddleware:
    """A request still unanswered after `timeout_seconds` is cancelled: 408 if its body was
    still arriving (a slow or stalled client), else 503 with `Retry-After`.

    Cancellation reaches awaits (body reads, the event loop); work already handed to a worker
    thread finishes first, so that work is bounded by itself (sweeps by `MAX_SWEEP_POINTS`).
    A response already started cannot be replaced: the connection is then closed.
    """

    def __init__(
        self, app: ASGIApp, *, timeout_seconds: float, body_timeout_seconds: float | None = None
    ) -> None:
        self.app = app
        self.timeout_seconds = timeout_seconds
        # The body has its own, shorter clock: a client trickling a body must not hold an
        # in-flight slot for the whole request timeout.
        self.body_timeout_seconds = min(body_timeout_seconds or timeout_seconds, timeout_seconds)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (
            scope["type"] != "http"
            or path in UNGUARDED_PATHS
            or path.startswith(UNTIMED_PATH_PREFIXES)
        ):
            await self.app(scope, receive, send)
            return
        expect_body = _has_body(scope)
        body_done = False
        waiting_for_body = False
        started = False
        begun = anyio.current_time()
        # One cancel scope for both clocks: its deadline is the body's until the body is in,
        # then moves to the request's (no scope per read on the fast path).
        first = self.body_timeout_seconds if expect_body else self.timeout_seconds
        with anyio.CancelScope(deadline=begun + first) as deadline:

            async def tracking_receive() -> Message:
                nonlocal body_done, waiting_for_body
                waiting_for_body = not body_done
                message = await receive()  # a timeout cancels here with the flag still set
                waiting_for_body = False
                if not body_done and (
                    message["type"] != "http.request" or not message.get("more_body", False)
                ):
                    body_done = True
                    deadline.deadline = begun + self.timeout_seconds
                return message

            async def tracking_send(message: Message) -> None:
                nonlocal started
                if message["type"] == "http.response.start":
                    started = True
                await send(message)

            await self.app(scope, tracking_receive, tracking_send)
        if not deadline.cancelled_caught or started:
            return
        body_late = expect_body and not body_done
        if body_late:
            limit = f"{self.body_timeout_seconds:g} s (KVPLAN_BODY_TIMEOUT_SECONDS)"
        else:
            limit = f"{self.timeout_seconds:g} s (KVPLAN_REQUEST_TIMEOUT_SECONDS)"
        if waiting_for_body or body_late:  # cancelled while the client was still sending
            response = problem_response(
                make_problem(
                    408,
                    f"the request body did not arrive within {limit}; send it in one go",
                    slug="request-timeout",
                ),
                headers={"Connection": "close"},
            )
        else:
            response = _busy_response(
                f"the request took longer than {limit}; retry, or ask for less work",
                slug="timeout",
                retry_after_seconds=1,
            )
        await response(scope, receive, send)


class ClientRateLimiter:
    """Token bucket per client: `burst` requests at once, refilled at `per_minute` a minute.

    Thread-safe (sync dependencies run in worker threads). Memory is bounded: past
    `max_clients` keys, clients whose bucket has refilled are forgotten (they lose nothing).
    """

    def __init__(
        self,
        per_minute: int,
        burst: int,
        *,
        max_clients: int = _RATE_MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate_per_second = per_minute / 60.0
        self.burst = burst
        self.max_clients = max_clients
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self._lock = threading.Lock()

    def _tokens(self, key: str, now: float) -> float:
        tokens, at = self._buckets.get(key, (float(self.burst), now))
        return min(float(self.burst), tokens + (now - at) * self.rate_per_second)

    def acquire(self, key: str) -> float:
        """Take one token: 0.0 if allowed, else the seconds until one is available."""
        with self._lock:
            now = self._clock()
            tokens = self._tokens(key, now)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                self._prune(now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate_per_second

    def _prune(self, now: float) -> None:
        if len(self._buckets) <= self.max_clients:
            return
        for key in [k for k in self._buckets if self._tokens(k, now) >= self.burst]:
            del self._buckets[key]
        while len(self._buckets) > self.max_clients:  # all busy: drop the oldest entries
            del self._buckets[next(iter(self._buckets))]


_state_lock = threading.Lock()


def admin_rate_limiter(app: Any) -> ClientRateLimiter:
    """The app's admin rate limiter, built on first use from its settings."""
    with _state_lock:
        limiter: ClientRateLimiter | None = getattr(app.state, "admin_rate_limiter", None)
        if limiter is None:
            settings = getattr(app.state, "settings", None)
            limiter = ClientRateLimiter(
                int(getattr(settings, "admin_rate_per_minute", DEFAULT_ADMIN_RATE_PER_MINUTE)),
                int(getattr(settings, "admin_rate_burst", DEFAULT_ADMIN_RATE_BURST)),
            )
            app.state.admin_rate_limiter = limiter
    return limiter


def enforce_admin_rate(request: Request) -> None:
    """429 with `Retry-After` when this client has used up its admin requests.

    Counts every attempt, authenticated or not, so it also slows down token guessing. The
    client is the peer address: behind a proxy, run uvicorn with `--proxy-headers` and
    `FORWARDED_ALLOW_IPS`, or every client shares the proxy's bucket.
    """
    key = request.client.host if request.client else "unknown"
    wait_seconds = admin_rate_limiter(request.app).acquire(key)
    if wait_seconds > 0:
        retry = max(1, math.ceil(wait_seconds))
        raise HTTPException(
            429,
            detail=f"too many admin requests from this client; retry in {retry} s "
            "(the limit is KVPLAN_ADMIN_RATE_PER_MINUTE, burst KVPLAN_ADMIN_RATE_BURST)",
            headers={"Retry-After": str(retry)},
        )


class SlotGuard:
    """`slots` concurrent runs of some expensive work per process; no waiting: when all are
    taken, 503 with `Retry-After`. Used from the event loop only, so a counter suffices."""

    def __init__(self, slots: int, what: str, setting: str) -> None:
        self.slots = slots
        self.what = what
        self.setting = setting
        self.taken = 0

    @contextmanager
    def slot(self) -> Iterator[None]:
        if self.taken >= self.slots:
            raise HTTPException(
                503,
                detail=f"{self.slots} {self.what} already running on this server; retry in 1 s, "
                f"or ask for fewer points (the limit is {self.setting})",
                headers={"Retry-After": "1"},
            )
        self.taken += 1
        try:
            yield
        finally:
            self.taken -= 1


def big_sweep_slot(app: Any, points: int) -> AbstractContextManager[None]:
    """A slot of the big-sweep guard for a sweep of more than BIG_SWEEP_POINTS points."""
    if points <= BIG_SWEEP_POINTS:
        return nullcontext()
    with _state_lock:
        guard: SlotGuard | None = getattr(app.state, "big_sweep_guard", None)
        if guard is None:
            settings = getattr(app.state, "settings", None)
            slots = int(getattr(settings, "max_concurrent_big_sweeps", DEFAULT_BIG_SWEEP_SLOTS))
            guard = SlotGuard(slots, "big sweeps are", "KVPLAN_MAX_CONCURRENT_BIG_SWEEPS")
            app.state.big_sweep_guard = guard
    return guard.slot()
