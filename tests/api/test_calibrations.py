"""Calibrations router on a bare app: admin guards, one probe at a time, bounds, 404s, restarts.

The router is mounted under /api/v1 with the project's problem+json handlers, a SimpleNamespace
for settings and a real SQLite store in tmp_path. The probe itself is a stub (the CPU probe has
its own tests), so every guard is exercised without measuring anything.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import anyio.to_thread
import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr
from starlette.testclient import TestClient

from planner.api import calibrations
from planner.api.problems import install_problem_handlers
from planner.probe import CalibrationIn, ProbeRequest, ProbeUnavailable
from planner.store import Store

TOKEN = "t0k3n-for-tests-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RECORD = {
    "device_name": "NVIDIA H200",
    "backend": "sdpa-flash",
    "copy_bandwidth_bytes_per_s": 4.3e12,
    "decode_bandwidth_bytes_per_s": 4.0e12,
    "fixed_overhead_seconds": 2e-5,
}
CANNED = CalibrationIn.model_validate({**RECORD, "device_kind": "cuda", "flags": ["gpu_figures"]})


def make_app(data_dir: Path, token: str | None = TOKEN) -> FastAPI:
    app = FastAPI()
    install_problem_handlers(app)
    app.include_router(calibrations.router, prefix="/api/v1")
    app.state.settings = SimpleNamespace(admin_token=SecretStr(token) if token else None)
    app.state.store = Store(data_dir)
    return app


def use_runner(app: FastAPI, runner: Callable[[ProbeRequest], CalibrationIn]) -> list[ProbeRequest]:
    calls: list[ProbeRequest] = []

    def wrapped(body: ProbeRequest) -> CalibrationIn:
        calls.append(body)
        return runner(body)

    app.dependency_overrides[calibrations.get_probe_runner] = lambda: wrapped
    return calls


@pytest.fixture
def app(tmp_path: Path) -> Iterator[FastAPI]:
    app = make_app(tmp_path)
    yield app
    app.state.store.close()


@pytest.fixture
def client(app: FastAPI) -> TestClient:
    return TestClient(app, raise_server_exceptions=False)


# --- admin guard ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"), [("post", "/api/v1/probe"), ("post", "/api/v1/calibrations")]
)
def test_admin_routes_are_disabled_without_a_token(tmp_path: Path, method: str, path: str) -> None:
    app = make_app(tmp_path, token=None)
    calls = use_runner(app, lambda body: CANNED)
    client = TestClient(app, raise_server_exceptions=False)
    resp = client.request(method, path, json={}, headers=AUTH)
    assert resp.status_code == 404
    assert resp.headers["content-type"].startswith("application/problem+json")
    assert "KVPLAN_ADMIN_TOKEN" in resp.json()["detail"]
    assert calls == []
    assert client.get("/api/v1/calibrations").status_code == 200  # reads stay public
    app.state.store.close()


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token-0123456789"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": "Bearer"},
        {"Authorization": f"Bearer {TOKEN}x"},
    ],
)
@pytest.mark.parametrize("path", ["/api/v1/probe", "/api/v1/calibrations"])
def test_missing_or_wrong_bearer_is_401(
    app: FastAPI, client: TestClient, path: str, headers: dict[str, str]
) -> None:
    calls = use_runner(app, lambda body: CANNED)
    resp = client.post(path, json=RECORD, headers=headers)
    assert resp.status_code == 401
    assert resp.headers["WWW-Authenticate"].startswith("Bearer")
    assert resp.headers["content-type"].startswith("application/problem+json")
    assert TOKEN not in resp.text
    assert calls == []
    assert client.get("/api/v1/calibrations").json()["items"] == []


# --- probe ------------------------------------------------------------------------------------


def test_probe_stores_and_answers_201_with_id(app: FastAPI, client: TestClient) -> None:
    calls = use_runner(app, lambda body: CANNED)
    resp = client.post("/api/v1/probe", json={"device": "cpu", "max_seconds": 5}, headers=AUTH)
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert body["id"] and body["measured_at"]
    assert body["decode_bandwidth_bytes_per_s"] == RECORD["decode_bandwidth_bytes_per_s"]
    assert resp.headers["Location"] == f"/api/v1/calibrations/{body['id']}"
    assert calls[0].device == "cpu" and calls[0].max_seconds == 5
    assert client.get(resp.headers["Location"]).json() == body


@pytest.mark.parametrize(
    "body",
    [
        {"max_seconds": 121},
        {"max_seconds": 1e9},
        {"max_seconds": -1},
        {"max_memory_bytes": 1 << 40},
        {"attention_shape": {"num_q_heads": 4096, "num_kv_heads": 8, "head_dim": 128}},
        {"attention_shape": {"num_q_heads": 32, "num_kv_heads": 8, "head_dim": 100000}},
        {"device": "tpu"},
        {"unknown": 1},
    ],
)
def test_oversized_probe_is_422_before_anything_runs(
    app: FastAPI, client: TestClient, body: dict[str, object]
) -> None:
    calls = use_runner(app, lambda b: CANNED)
    resp = client.post("/api/v1/probe", json=body, headers=AUTH)
    assert resp.status_code == 422, resp.text
    assert resp.json()["errors"], resp.json()
    assert calls == []


def test_unavailable_backend_is_422_naming_device(app: FastAPI, client: TestClient) -> None:
    def no_cuda(body: ProbeRequest) -> CalibrationIn:
        raise ProbeUnavailable("no CUDA/ROCm device is visible to torch; use device 'cpu'")

    use_runner(app, no_cuda)
    resp = client.post("/api/v1/probe", json={"device": "cuda"}, headers=AUTH)
    assert resp.status_code == 422
    assert resp.json()["errors"][0]["field"] == "device"


async def test_second_concurrent_probe_gets_429_with_retry_after(app: FastAPI) -> None:
    started, release = threading.Event(), threading.Event()

    def slow(body: ProbeRequest) -> CalibrationIn:
        started.set()
        release.wait(10)
        return CANNED

    use_runner(app, slow)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        first = asyncio.create_task(
            client.post("/api/v1/probe", json={"device": "cpu", "max_seconds": 30}, headers=AUTH)
        )
        assert await anyio.to_thread.run_sync(started.wait, 10)
        second = await client.post("/api/v1/probe", json={"device": "cpu"}, headers=AUTH)
        assert second.status_code == 429
        assert second.headers["content-type"].startswith("application/problem+json")
        assert 1 <= int(second.headers["Retry-After"]) <= 30 + 10
        release.set()
        done = await first
        assert done.status_code == 201
        # The slot is free again once the first probe finished.
        third = await client.post("/api/v1/probe", json={"device": "cpu"}, headers=AUTH)
        assert third.status_code == 201


# --- ingest and reads -------------------------------------------------------------------------


def test_ingest_then_read_back(client: TestClient) -> None:
    resp = client.post("/api/v1/calibrations", json=RECORD, headers=AUTH)
    assert resp.status_code == 201, resp.text
    stored = resp.json()
    got = client.get(f"/api/v1/calibrations/{stored['id']}")
    assert got.status_code == 200 and got.json() == stored
    listed = client.get("/api/v1/calibrations").json()
    assert [c["id"] for c in listed["items"]] == [stored["id"]]
    assert listed["limit"] == 50 and listed["offset"] == 0


@pytest.mark.parametrize(
    "change",
    [
        {"decode_bandwidth_bytes_per_s": None},
        {"decode_bandwidth_bytes_per_s": -1},
        {"fixed_overhead_seconds": 10},
        {"id": "chosen-by-client"},
        {"device_name": "x" * 1000},
    ],
)
def test_invalid_ingest_is_422(client: TestClient, change: dict[str, object]) -> None:
    resp = client.post("/api/v1/calibrations", json={**RECORD, **change}, headers=AUTH)
    assert resp.status_code == 422
    assert resp.json()["errors"]


def test_non_finite_ingest_is_rejected(client: TestClient) -> None:
    raw = (
        '{"device_name":"x","backend":"b","copy_bandwidth_bytes_per_s":1e400,'
        '"decode_bandwidth_bytes_per_s":1e12,"fixed_overhead_seconds":0}'
    )
    resp = client.post(
        "/api/v1/calibrations",
        content=raw,
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert resp.status_code in (400, 422)


@pytest.mark.parametrize("calibration_id", ["0" * 32, "no-such-id", "..%2F..%2Fetc", "x" * 200])
def test_unknown_id_is_404(client: TestClient, calibration_id: str) -> None:
    resp = client.get(f"/api/v1/calibrations/{calibration_id}")
    assert resp.status_code == 404
    assert resp.headers["content-type"].startswith("application/problem+json")


@pytest.mark.parametrize("query", ["limit=0", "limit=201", "offset=-1"])
def test_list_bounds(client: TestClient, query: str) -> None:
    assert client.get(f"/api/v1/calibrations?{query}").status_code == 422


def test_restart_keeps_calibrations(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    stored = TestClient(app).post("/api/v1/calibrations", json=RECORD, headers=AUTH).json()
    app.state.store.close()
    again = make_app(tmp_path)
    try:
        resp = TestClient(again).get(f"/api/v1/calibrations/{stored['id']}")
        assert resp.status_code == 200 and resp.json() == stored
    finally:
        again.state.store.close()


def test_no_store_is_503(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    app.state.store.close()
    app.state.store = None
    resp = TestClient(app, raise_server_exceptions=False).get("/api/v1/calibrations")
    assert resp.status_code == 503


def test_idempotency_key_replays_the_first_record(client: TestClient) -> None:
    headers = {**AUTH, "Idempotency-Key": "retry-0001"}
    first = client.post("/api/v1/calibrations", json=RECORD, headers=headers)
    assert first.status_code == 201
    again = client.post("/api/v1/calibrations", json=RECORD, headers=headers)
    assert again.status_code == 200
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    listed = client.get("/api/v1/calibrations").json()["items"]
    assert [c["id"] for c in listed] == [first.json()["id"]]
    changed = client.post(
        "/api/v1/calibrations", json={**RECORD, "device_name": "other"}, headers=headers
    )
    assert changed.status_code == 422
    assert changed.json()["errors"][0]["field"] == "Idempotency-Key"


def test_deleted_database_is_503_not_a_lost_201(app: FastAPI, client: TestClient) -> None:
    path = app.state.store.path
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    response = client.post("/api/v1/calibrations", json=RECORD, headers=AUTH)
    assert response.status_code == 503
    assert "vanished" in response.json()["detail"]
