"""Admission and the worker pool (planner/api/work.py, planner/api/workers.py), in-process.

Each test uses small limits through `Settings` so the defects of issue 15 reproduce in well under
a second of work: over-budget refused before work (422), heavy work in a killable worker process,
a deadline that really stops it, a full queue refused at once.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.testclient import TestClient

from planner.api.workers import PoolBusy, WorkerPool, WorkTimeout
from planner.app import create_app
from planner.settings import Settings
from tests.api.conftest import QUESTION_48_GIB
from tests.test_cost import DEFECT_1_BASE, pasted

# About 0.25-0.5 s of CPU on the reference machine: 4096 layers over 1024 pipeline stages.
HEAVY_PLAN = {"model": pasted(4096), "kv_budget_bytes": 1 << 35, "pipeline_parallel_size": 1024}


def _client(tmp_path: Path, **limits: Any) -> TestClient:
    return TestClient(create_app(Settings(data_dir=tmp_path, **limits)))


def test_defect_1_sweep_is_422_naming_the_limit(tmp_path: Path) -> None:
    body = {
        "base": DEFECT_1_BASE,
        "context_tokens": [(1 << 24) - i for i in range(64)],
        "batch_sizes": [1, 2, 3, 4],
        "include_plans": True,
    }
    with _client(tmp_path) as client:
        started = time.perf_counter()
        response = client.post("/api/v1/sweep", json=body)
        elapsed = time.perf_counter() - started
        problem = response.json()
        assert response.status_code == 422, problem
        assert problem["type"] == "urn:kvplan:problem:too-expensive"
        assert "KVPLAN_MAX_REQUEST_COST" in problem["detail"]
        assert problem["errors"] and problem["errors"][0]["loc"] == ["body"]
        # Refused from its shape: no worker was ever started for it.
        assert client.app.state.work_pool.stats.started == 0  # type: ignore[attr-defined]
        metrics = client.get("/metrics").text
    assert 'kvplan_work_refused_total{reason="cost"} 1.0' in metrics
    assert elapsed < 30  # a guard against hanging, not a speed assertion


def test_heavy_plan_runs_in_a_worker_and_matches_inline(tmp_path: Path) -> None:
    inline = _client(tmp_path / "a", inline_cost=10**9)
    pooled = _client(tmp_path / "b", inline_cost=0)
    with inline, pooled:
        a = inline.post("/api/v1/plan", json=QUESTION_48_GIB)
        b = pooled.post("/api/v1/plan", json=QUESTION_48_GIB)
        assert a.status_code == b.status_code == 200
        assert a.content == b.content
        assert pooled.app.state.work_pool.stats.jobs == 1  # type: ignore[attr-defined]
        assert inline.app.state.work_pool.stats.jobs == 0  # type: ignore[attr-defined]
        # A core error from a worker keeps its problem shape.
        bad = pooled.post("/api/v1/plan", json={**QUESTION_48_GIB, "model": "no/such"})
        assert bad.status_code == 422
        assert bad.headers["content-type"] == "application/problem+json"
        assert bad.json()["errors"][0]["field"] == "model"


def test_deadline_kills_the_worker(tmp_path: Path) -> None:
    with _client(tmp_path, inline_cost=0, work_deadline_seconds=0.05) as client:
        response = client.post("/api/v1/plan", json=HEAVY_PLAN)
        assert response.status_code == 503, response.text
        assert "KVPLAN_WORK_DEADLINE_SECONDS" in response.json()["detail"]
        assert response.headers["Retry-After"] == "1"
        pool = client.app.state.work_pool  # type: ignore[attr-defined]
        assert pool.stats.killed_by_deadline == 1
        # A replacement starts in the background; the next request gets it and a real answer.
        for _ in range(300):
            if pool._idle:
                break
            time.sleep(0.05)
        assert pool.stats.started == 2
        assert client.post("/api/v1/plan", json=QUESTION_48_GIB).status_code == 200


async def test_pool_kills_on_deadline_and_refuses_when_full() -> None:
    pool = WorkerPool(1, max_waiting=0, max_rss_bytes=1 << 40)
    try:
        # A job that would run for 60 s: the deadline ends it, and its process is gone.
        with pytest.raises(WorkTimeout):
            await pool.run(1.5, time.sleep, 60)
        assert pool.stats.killed_by_deadline == 1

        async def hold() -> None:
            await pool.run(10, time.sleep, 1.0)

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold)
            await anyio.sleep(0.8)  # the one worker is busy, no room to wait
            with pytest.raises(PoolBusy):
                await pool.run(10, os.getpid)
        assert await pool.run(10, os.getpid) != os.getpid()  # a separate process
    finally:
        pool.close()


async def test_pool_recycles_a_worker_over_its_rss_limit() -> None:
    pool = WorkerPool(1, max_waiting=1, max_rss_bytes=8 << 20)
    try:
        first = await pool.run(10, os.getpid)
        await anyio.sleep(0)
        second = await pool.run(10, os.getpid)
        # Any Python worker is over 8 MiB: replaced after each job.
        assert first != second and pool.stats.recycled == 2
    finally:
        pool.close()


def test_bandwidth_below_the_minimum_is_refused_not_null(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        response = client.post(
            "/api/v1/plan", json={**QUESTION_48_GIB, "bandwidth_bytes_per_s": 5e-324}
        )
    assert response.status_code == 422
    error = response.json()["errors"][0]
    assert error["field"] == "bandwidth_bytes_per_s" and "1000000" in error["msg"]
