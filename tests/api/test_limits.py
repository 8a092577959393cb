"""Process-wide guards (planner/api/limits.py): in-flight cap, request timeout, admin rate limit,
big-sweep slots, and the `--workers` warning. Research B.6: fire N+1 concurrent requests at a
stub that blocks on an event; assert the extra one is refused with `Retry-After`, and that the
held ones complete once released. No timing assertions: blocking is by events, and the
timeouts under test are far shorter than the stalls that trigger them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest
from fastapi import FastAPI, Request
from pydantic import SecretStr
from starlette.testclient import TestClient
from typer.testing import CliRunner

from planner.api import limits
from planner.api.limits import (
    BIG_SWEEP_POINTS,
    ClientRateLimiter,
    InFlightLimitMiddleware,
    TimeoutMiddleware,
)
from planner.api.problems import install_problem_handlers
from planner.app import create_app
from planner.settings import Settings
from tests.api.conftest import QUESTION_48_GIB

TOKEN = "t0k3n-for-limit-tests-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PROBLEM = "application/problem+json"
RECORD = {
    "device_name": "NVIDIA H200",
    "backend": "sdpa-flash",
    "copy_bandwidth_bytes_per_s": 4.3e12,
    "decode_bandwidth_bytes_per_s": 4.0e12,
    "fixed_overhead_seconds": 2e-5,
}


def gated_app(release: threading.Event, entered: threading.Semaphore) -> FastAPI:
    """An app whose /slow route holds until `release` is set (in a worker thread)."""
    app = FastAPI()
    install_problem_handlers(app)

    @app.get("/slow")
    async def slow() -> dict[str, str]:
        entered.release()
        await anyio.to_thread.run_sync(release.wait, 30)
        return {"ok": "yes"}

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


# --- in-flight limit --------------------------------------------------------------------------


async def test_request_over_the_in_flight_limit_gets_503_at_once() -> None:
    release, entered = threading.Event(), threading.Semaphore(0)
    app = InFlightLimitMiddleware(gated_app(release, entered), max_in_flight=2)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        held = [asyncio.create_task(client.get("/slow")) for _ in range(2)]
        for _ in held:
            assert await anyio.to_thread.run_sync(entered.acquire, True, 10)
        extra = await client.get("/slow")
        assert extra.status_code == 503
        assert extra.headers["Retry-After"] == "1"
        assert extra.headers["content-type"].startswith(PROBLEM)
        assert "KVPLAN_MAX_CONCURRENT_REQUESTS" in extra.json()["detail"]
        # Liveness still answers while the app is full.
        assert (await client.get("/healthz")).status_code == 200
        release.set()
        assert [r.status_code for r in await asyncio.gather(*held)] == [200, 200]
        assert app.in_flight == 0
        assert (await client.get("/slow")).status_code == 200


# --- timeout ----------------------------------------------------------------------------------


async def test_slow_handler_gets_503_after_the_timeout() -> None:
    app = FastAPI()
    install_problem_handlers(app)
    never = asyncio.Event()

    @app.get("/stuck")
    async def stuck() -> None:
        await never.wait()  # never set: only the timeout ends this request

    guarded = TimeoutMiddleware(app, timeout_seconds=0.2)
    transport = httpx.ASGITransport(app=guarded)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        resp = await client.get("/stuck")
    assert resp.status_code == 503
    assert resp.headers["Retry-After"] == "1"
    assert "KVPLAN_REQUEST_TIMEOUT_SECONDS" in resp.json()["detail"]


async def test_body_that_stops_arriving_gets_408() -> None:
    app = FastAPI()
    install_problem_handlers(app)

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, int]:  # pragma: no cover - never completes
        return {"n": len(await request.body())}

    guarded = TimeoutMiddleware(app, timeout_seconds=0.2)
    sent: list[dict[str, Any]] = []
    stalled = asyncio.Event()
    first = True

    async def receive() -> dict[str, Any]:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": b'{"a":', "more_body": True}
        await stalled.wait()  # the client never sends the rest
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "path": "/echo",
        "raw_path": b"/echo",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1234),
        "server": ("test", 80),
        "scheme": "http",
        "root_path": "",
    }
    await guarded(scope, receive, send)
    assert sent[0]["type"] == "http.response.start"
    assert sent[0]["status"] == 408
    assert (b"connection", b"close") in sent[0]["headers"]


async def test_probe_route_is_not_timed() -> None:
    app = FastAPI()
    done = asyncio.Event()

    @app.post("/api/v1/probe")
    async def probe() -> dict[str, str]:
        await asyncio.sleep(0.3)  # longer than the timeout below: the probe has its own bound
        done.set()
        return {"ok": "yes"}

    guarded = TimeoutMiddleware(app, timeout_seconds=0.05)
    transport = httpx.ASGITransport(app=guarded)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        assert (await client.post("/api/v1/probe")).status_code == 200
    assert done.is_set()


# --- admin rate limit -------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_burst_then_rate() -> None:
    clock = FakeClock()
    limiter = ClientRateLimiter(per_minute=30, burst=3, clock=clock)  # one token per 2 s
    assert [limiter.acquire("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.acquire("a") == pytest.approx(2.0)
    assert limiter.acquire("b") == 0.0  # per client
    clock.now += 2.0
    assert limiter.acquire("a") == 0.0
    assert limiter.acquire("a") == pytest.approx(2.0)
    clock.now += 3600
    assert [limiter.acquire("a") for _ in range(3)] == [0.0, 0.0, 0.0]  # capped at burst


def test_token_bucket_memory_is_bounded() -> None:
    clock = FakeClock()
    limiter = ClientRateLimiter(per_minute=60, burst=2, max_clients=100, clock=clock)
    for i in range(1000):
        limiter.acquire(f"10.0.{i // 256}.{i % 256}")
    assert len(limiter._buckets) <= 100


@pytest.fixture
def admin_client(tmp_path: Path) -> Callable[..., TestClient]:
    def make(**overrides: Any) -> TestClient:
        settings = Settings(data_dir=tmp_path, admin_token=SecretStr(TOKEN), **overrides)
        return TestClient(create_app(settings), raise_server_exceptions=False)

    return make


def test_admin_route_rate_limited_per_client_with_retry_after(
    admin_client: Callable[..., TestClient],
) -> None:
    with admin_client(admin_rate_burst=3, admin_rate_per_minute=6) as client:
        codes = [
            client.post("/api/v1/calibrations", json=RECORD, headers=AUTH).status_code
            for _ in range(3)
        ]
        assert codes == [201, 201, 201]
        limited = client.post("/api/v1/calibrations", json=RECORD, headers=AUTH)
        assert limited.status_code == 429
        assert limited.headers["content-type"].startswith(PROBLEM)
        assert 1 <= int(limited.headers["Retry-After"]) <= 10  # one token per 10 s
        assert "KVPLAN_ADMIN_RATE_PER_MINUTE" in limited.json()["detail"]
        # Wrong tokens count too (token guessing is slowed down), and reads stay open.
        bad = client.post("/api/v1/calibrations", json=RECORD, headers={"Authorization": "x"})
        assert bad.status_code == 429
        assert client.get("/api/v1/calibrations").status_code == 200


def test_admin_rate_limit_does_not_apply_when_admin_is_disabled(tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=tmp_path, admin_rate_burst=1))
    with TestClient(app, raise_server_exceptions=False) as client:
        for _ in range(3):
            assert client.post("/api/v1/calibrations", json=RECORD).status_code == 404


# --- big sweeps -------------------------------------------------------------------------------


def big_sweep() -> dict[str, Any]:
    contexts = [1024 * (i + 1) for i in range(BIG_SWEEP_POINTS // 2 + 1)]
    return {"base": QUESTION_48_GIB, "context_tokens": contexts, "batch_sizes": [1, 2]}


async def test_big_sweeps_beyond_the_slots_get_503(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from planner.api import sweep as sweep_api

    release, entered = threading.Event(), threading.Semaphore(0)
    real = sweep_api.run_job

    async def held(*args: Any, **kwargs: Any) -> Any:
        entered.release()
        await anyio.to_thread.run_sync(release.wait, 30)
        return await real(*args, **kwargs)

    monkeypatch.setattr(sweep_api, "run_job", held)
    app = create_app(Settings(data_dir=tmp_path, max_concurrent_big_sweeps=1))
    transport = httpx.ASGITransport(app=app)
    async with (
        lifespan(app),
        httpx.AsyncClient(transport=transport, base_url="http://test") as client,
    ):
        first = asyncio.create_task(client.post("/api/v1/sweep", json=big_sweep()))
        assert await anyio.to_thread.run_sync(entered.acquire, True, 10)
        second = await client.post("/api/v1/sweep", json=big_sweep())
        assert second.status_code == 503
        assert second.headers["Retry-After"] == "1"
        assert "KVPLAN_MAX_CONCURRENT_BIG_SWEEPS" in second.json()["detail"]
        # A small sweep does not need a slot.
        small = {**big_sweep(), "context_tokens": [1024], "batch_sizes": [1]}
        release.set()
        assert (await client.post("/api/v1/sweep", json=small)).status_code == 200
        assert (await first).status_code == 200
        assert (await client.post("/api/v1/sweep", json=big_sweep())).status_code == 200


class lifespan:
    """Run the app's lifespan (httpx.ASGITransport does not)."""

    def __init__(self, app: FastAPI) -> None:
        self.cm = app.router.lifespan_context(app)

    async def __aenter__(self) -> None:
        await self.cm.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        await self.cm.__aexit__(*exc)


# --- documentation and settings ---------------------------------------------------------------


def test_guard_statuses_are_documented(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(data_dir=tmp_path))) as client:
        spec = client.get("/api/v1/openapi.json").json()
    ops = spec["paths"]["/api/v1/calibrations"]["post"]["responses"]
    assert "429" in ops
    for path in ("/api/v1/plan", "/api/v1/sweep"):
        responses = spec["paths"][path]["post"]["responses"]
        assert {"408", "503"} <= set(responses), path


def test_limits_come_from_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVPLAN_MAX_CONCURRENT_REQUESTS", "7")
    monkeypatch.setenv("KVPLAN_REQUEST_TIMEOUT_SECONDS", "2.5")
    monkeypatch.setenv("KVPLAN_ADMIN_RATE_PER_MINUTE", "12")
    settings = Settings()
    assert settings.max_concurrent_requests == 7
    assert settings.request_timeout_seconds == 2.5
    assert settings.admin_rate_per_minute == 12
    assert (
        limits.DEFAULT_MAX_CONCURRENT_REQUESTS
        == Settings.model_fields["max_concurrent_requests"].default
    )


def test_serve_with_several_workers_says_one_process_per_container(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import uvicorn

    from planner.cli import app as cli

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: calls.append(kw))
    monkeypatch.delenv("KVPLAN_DATABASE_URL", raising=False)
    # serve() exports KVPLAN_HOST/PORT for its workers: restore them after the test.
    monkeypatch.setenv("KVPLAN_HOST", "127.0.0.1")
    monkeypatch.setenv("KVPLAN_PORT", "8000")
    result = CliRunner().invoke(cli, ["serve", "--workers", "3", "--port", "18999"])
    assert result.exit_code == 0, result.output
    assert "one process per container" in result.stderr
    assert calls[0]["workers"] == 3
    one = CliRunner().invoke(cli, ["serve", "--port", "18999"])
    assert one.exit_code == 0 and "per container" not in one.stderr
