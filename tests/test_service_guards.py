"""Issue 23, items 5 and 11, on a real `kvplan serve`: a client that leaves has its job killed;
a dead worker is replaced and the job retried; slow bodies take no slot of the work; readiness
reflects failing writes.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from starlette.testclient import TestClient

from planner.api.workers import WorkerPool
from planner.app import create_app
from planner.settings import Settings
from planner.store import StoreError
from tests.api.conftest import QUESTION_48_GIB
from tests.live_server import ADMIN_TOKEN, AUTH, LiveServer
from tests.test_cost import DEFECT_1_BASE

# Seconds of CPU in a worker (256 request entries over 4096 layers and 4096 windows).
HEAVY_PLAN = {
    **DEFECT_1_BASE,
    "requests": [{"context_tokens": 1024 + i, "count": 1} for i in range(256)],
}
RECORD = {
    "device_name": "NVIDIA H200",
    "backend": "sdpa-flash",
    "copy_bandwidth_bytes_per_s": 4.3e12,
    "decode_bandwidth_bytes_per_s": 4.0e12,
    "fixed_overhead_seconds": 2e-5,
}


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _leave_after(url: str, body: bytes, seconds: float) -> None:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        head = (
            f"POST /api/v1/plan HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        sock.sendall(head + body)
        time.sleep(seconds)


def test_clients_that_leave_have_their_jobs_killed(tmp_path: Path) -> None:
    env = {
        "KVPLAN_DATA_DIR": str(tmp_path / "data"),
        "KVPLAN_WORKERS": "1",
        "KVPLAN_MAX_REQUEST_COST": str(10**9),
        "KVPLAN_MAX_RESPONSE_BYTES": str(1 << 30),
        "KVPLAN_WORK_DEADLINE_SECONDS": "60",
    }
    body = json.dumps(HEAVY_PLAN).encode()
    with LiveServer(env, tmp_path / "server.log") as live:
        for _ in range(5):
            _leave_after(live.url, body, 0.1)
        time.sleep(0.5)
        # The one worker is free again at once (replaced after each kill): a normal job that
        # needs a worker is answered, not queued behind five heavy plans nobody waits for.
        started = time.monotonic()
        sweep = {"base": QUESTION_48_GIB, "context_tokens": [1024, 2048], "batch_sizes": [1, 2, 4]}
        answer = httpx.post(f"{live.url}/api/v1/sweep", json=sweep, timeout=30)
        took = time.monotonic() - started
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            metrics = httpx.get(f"{live.url}/metrics").text
            if _metric(metrics, "kvplan_client_disconnects_total") >= 5:
                break
            time.sleep(0.2)
    print(
        f"5 heavy plans left after 0.1 s: next sweep answered in {took:.2f} s, "
        f"{_metric(metrics, 'kvplan_client_disconnects_total'):.0f} disconnects counted"
    )
    assert answer.status_code == 200, answer.text
    assert took < 5.0, took  # five heavy plans run to the end would take far longer
    assert _metric(metrics, "kvplan_client_disconnects_total") >= 5


async def test_a_worker_killed_while_idle_is_replaced_and_the_job_retried() -> None:
    pool = WorkerPool(1, max_waiting=4, max_rss_bytes=1 << 30)
    try:
        await asyncio.to_thread(pool.start)
        os.kill(pool._idle[0].process.pid, signal.SIGKILL)
        pool._idle[0].process.wait()
        assert await pool.run(30, sum, [1, 2, 3]) == 6
        assert pool.stats.died == 1
    finally:
        pool.close()


async def test_a_worker_that_dies_under_a_job_is_retried_once() -> None:
    pool = WorkerPool(1, max_waiting=4, max_rss_bytes=1 << 30)
    kept = None
    try:
        await asyncio.to_thread(pool.start)
        victim = pool._idle[0]
        # The pipe breaks as the job is sent, as if the worker had died. The worker's own end is
        # kept open (`kept`), so the process is still alive when it is taken: closing the real
        # pipe let a fast worker see EOF and exit first, which the pool rightly counts as dying
        # idle, not under a job.
        kept = victim.send
        _, broken = multiprocessing.Pipe()
        broken.close()
        victim.send = broken
        assert await pool.run(30, sum, [4, 5]) == 9
        assert pool.stats.retried == 1
        assert pool.stats.died == 1
    finally:
        pool.close()
        if kept is not None:
            kept.close()


def test_trickling_bodies_take_no_work_slot(tmp_path: Path) -> None:
    env = {"KVPLAN_DATA_DIR": str(tmp_path / "data"), "KVPLAN_MAX_CONCURRENT_REQUESTS": "4"}
    with LiveServer(env, tmp_path / "server.log") as live:
        host, port = live.url.removeprefix("http://").split(":")
        slow = []
        for _ in range(16):  # four times the slots, each sending 1 byte of a 100-byte body
            sock = socket.create_connection((host, int(port)))
            sock.sendall(
                b"POST /api/v1/plan HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100\r\n\r\n{"
            )
            slow.append(sock)
        time.sleep(0.3)
        try:
            plan = httpx.post(f"{live.url}/api/v1/plan", json=QUESTION_48_GIB, timeout=10)
            ready = httpx.get(f"{live.url}/readyz", timeout=10)
        finally:
            for sock in slow:
                sock.close()
    assert plan.status_code == 200, plan.text
    assert ready.status_code == 200, ready.text


def test_readiness_reflects_failing_writes(tmp_path: Path) -> None:
    app: FastAPI = create_app(Settings(data_dir=tmp_path, admin_token=ADMIN_TOKEN))
    with TestClient(app, raise_server_exceptions=False) as client:
        real = app.state.store

        class FullDisk:
            def __getattr__(self, name: str) -> Any:
                return getattr(real, name)

            def add(self, record: Any) -> Any:
                raise StoreError(f"cannot write to {real.path}: database or disk is full")

        app.state.store = FullDisk()
        assert client.get("/readyz").status_code == 200  # reads still work
        write = client.post("/api/v1/calibrations", json=RECORD, headers=AUTH)
        assert write.status_code == 503
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["errors"][0]["field"] == "checks.store"
        assert "disk is full" in ready.json()["detail"]
        app.state.store = real
        assert client.post("/api/v1/calibrations", json=RECORD, headers=AUTH).status_code == 201
        assert client.get("/readyz").status_code == 200
