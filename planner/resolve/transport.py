"""The HTTP client `huggingface_hub` uses here: every Hub answer checked, every lookup bounded.

`huggingface_hub` takes its `httpx2.Client` from a factory (`set_client_factory`); this module
installs one whose transport enforces, for the lookup running in the current thread
(`lookup_budget`):

- one total deadline: every connect, read and write gets at most the time left, so a Hub that
  drips a byte at a time, or never answers a SYN, ends the lookup when the deadline does;
- no retries: a timeout, a network error, 429 or 5xx raises `HubRefused` (not an httpx error, so
  the client's backoff, which sleeps, never retries it); `retry_after_seconds` carries the Hub's
  `Retry-After`/`RateLimit` for the circuit breaker;
- no cross-host requests: only the endpoint's origin (and, for the public Hub, its CDN hosts)
  may be asked, so a redirect to another host or port is refused, not followed;
- bounded bytes: a body larger than the file's cap is refused from its `Content-Length` /
  `X-Linked-Size` before it is read, and counted while it streams when the length is absent;
  answers are asked for uncompressed (a compressed one is refused), so the bytes counted are
  the bytes kept;
- well-formed headers: `X-Repo-Commit` must be a 40-hex commit and `ETag`/`X-Linked-Etag` a plain
  token, because the client names cache paths after them (a `../` there would write outside the
  cache). Xet headers are dropped, so every byte goes through this transport.

Outside a budget (the CLI's own `huggingface_hub` use, if any) requests pass unchanged.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import httpcore2
import httpx2
from httpcore2._backends.sync import SyncBackend

RefusalKind = Literal["deadline", "network", "busy", "redirect", "malformed", "too_large"]

_COMMIT = re.compile(r"[0-9a-f]{40}")
_ETAG = re.compile(r'(?:W/)?"?([A-Za-z0-9_\-]{1,128})"?')
_PUBLIC_HUB_HOSTS = ("huggingface.co", "hf.co")
_XET_HEADERS = ("x-xet-hash", "x-xet-refresh-route", "x-xet-cas-url", "x-xet-access-token")


class HubRefused(Exception):
    """A Hub answer (or its absence) this service will not use; `kind` says which bound."""

    def __init__(self, kind: RefusalKind, detail: str, retry_after_seconds: float | None = None):
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.retry_after_seconds = retry_after_seconds


@dataclass
class _Budget:
    deadline: float  # time.monotonic()
    seconds: float
    origin: tuple[str, str, int]
    public_hub: bool
    max_bytes: int


_local = threading.local()


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or (443 if scheme == "https" else 80)


def _budget() -> _Budget | None:
    return getattr(_local, "budget", None)


@contextmanager
def lookup_budget(seconds: float, endpoint: str, max_bytes: int) -> Iterator[None]:
    """Bound the Hub requests this thread makes inside the block (see the module docstring)."""
    install()
    origin = _origin(endpoint)
    public = any(origin[1] == h or origin[1].endswith("." + h) for h in _PUBLIC_HUB_HOSTS)
    previous = _budget()
    _local.budget = _Budget(time.monotonic() + seconds, seconds, origin, public, max_bytes)
    try:
        yield
    finally:
        _local.budget = previous


@contextmanager
def file_cap(max_bytes: int) -> Iterator[None]:
    """Within a budget: the largest body the next requests may bring."""
    budget = _budget()
    if budget is None:
        yield
        return
    before = budget.max_bytes
    budget.max_bytes = max_bytes
    try:
        yield
    finally:
        budget.max_bytes = before


def _left(timeout: float | None) -> float | None:
    budget = _budget()
    if budget is None:
        return timeout
    left = budget.deadline - time.monotonic()
    if left <= 0:
        raise HubRefused("deadline", f"no answer within {budget.seconds:g} s")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore2.NetworkStream):
    """A socket stream whose every wait ends by the lookup's deadline."""

    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.NetworkStream:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, _left(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore2.NetworkBackend):
    def __init__(self) -> None:
        self._inner = SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        stream = self._inner.connect_tcp(host, port, _left(timeout), local_address, socket_options)
        return _Stream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        return _Stream(self._inner.connect_unix_socket(path, _left(timeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _CappedBody(httpx2.SyncByteStream):
    def __init__(self, inner: Any, cap: int) -> None:
        self._inner = inner
        self._cap = cap

    def __iter__(self) -> Iterator[bytes]:
        seen = 0
        for chunk in self._inner:
            seen += len(chunk)
            if seen > self._cap:
                raise HubRefused("too_large", f"a file larger than {self._cap} bytes")
            yield chunk

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if callable(close):
            close()


def _retry_after(headers: httpx2.Headers) -> float | None:
    value = headers.get("retry-after", "")
    if value.strip().isdigit():
        return float(value.strip())
    m = re.search(r"\bt\s*=\s*(\d+)", headers.get("ratelimit", ""))
    return float(m.group(1)) if m else None


def _int_header(headers: httpx2.Headers, name: str) -> int | None:
    value = headers.get(name)
    if value is None:
        return None
    if not value.strip().isdigit():
        raise HubRefused("malformed", f"a {name} header of {value[:40]!r}")
    return int(value)


class GuardedTransport(httpx2.HTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        # The pool's sockets come from the deadline-aware backend (httpcore's own hook).
        self._pool = httpcore2.ConnectionPool(
            ssl_context=httpx2.create_ssl_context(), network_backend=_Backend()
        )

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        budget = _budget()
        if budget is None:
            return super().handle_request(request)
        self._check_origin(str(request.url), budget)
        # Sizes are checked on the bytes that arrive: no compression (a 4 MiB gzip can inflate
        # to gigabytes after every check).
        request.headers["Accept-Encoding"] = "identity"
        try:
            response = super().handle_request(request)
        except HubRefused:
            raise
        except httpx2.TimeoutException:
            raise HubRefused("deadline", f"no answer within {budget.seconds:g} s") from None
        except httpx2.TransportError as exc:
            raise HubRefused("network", f"no network path ({type(exc).__name__})") from None
        try:
            self._check(request, response, budget)
        except HubRefused:
            response.close()
            raise
        return response

    @staticmethod
    def _check_origin(url: str, budget: _Budget) -> None:
        origin = _origin(url)
        if origin == budget.origin:
            return
        host = origin[1]
        cdn = (
            budget.public_hub
            and origin[0] == "https"
            and any(host == h or host.endswith("." + h) for h in _PUBLIC_HUB_HOSTS)
        )
        if not cdn:
            raise HubRefused(
                "redirect",
                f"a redirect to another host ({origin[0]}://{host}:"
                f"{origin[2]}), which is not followed",
            )

    @staticmethod
    def _check(request: httpx2.Request, response: httpx2.Response, budget: _Budget) -> None:
        status = response.status_code
        if status == 429 or status >= 500:
            retry = _retry_after(response.headers)
            raise HubRefused("busy", f"HTTP {status}", retry)
        headers = response.headers
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise HubRefused("malformed", f"a {encoding!r}-encoded answer to an identity request")
        commit = headers.get("x-repo-commit")
        if commit is not None and not _COMMIT.fullmatch(commit):
            raise HubRefused("malformed", f"an X-Repo-Commit of {commit[:60]!r}")
        for name in ("etag", "x-linked-etag"):
            tag = headers.get(name)
            if tag is not None and not _ETAG.fullmatch(tag):
                raise HubRefused("malformed", f"an {name} header of {tag[:60]!r}")
        for name in _XET_HEADERS:
            if name in headers:
                del headers[name]
        if 300 <= status < 400:
            location = headers.get("location")
            if location is not None:
                GuardedTransport._check_origin(str(request.url.join(location)), budget)
            return
        if "range" in request.headers or status >= 400:
            sizes = [_int_header(headers, "content-length")]
        else:
            sizes = [_int_header(headers, "content-length"), _int_header(headers, "x-linked-size")]
        for size in sizes:
            if size is not None and size > budget.max_bytes:
                raise HubRefused(
                    "too_large", f"a file of {size} bytes (the limit is {budget.max_bytes})"
                )
        if request.method != "HEAD":
            response.stream = _CappedBody(response.stream, budget.max_bytes)


def _client() -> httpx2.Client:
    from huggingface_hub.utils._http import hf_request_event_hook

    return httpx2.Client(
        transport=GuardedTransport(),
        event_hooks={"request": [hf_request_event_hook]},
        follow_redirects=True,
        timeout=None,
    )


_installed = False
_install_lock = threading.Lock()


def install() -> None:
    """Make `huggingface_hub` use the guarded client in this process (idempotent)."""
    global _installed
    if _installed:
        return
    with _install_lock:
        if not _installed:
            from huggingface_hub import set_client_factory

            set_client_factory(_client)
            _installed = True


__all__ = ["GuardedTransport", "HubRefused", "file_cap", "install", "lookup_budget"]
