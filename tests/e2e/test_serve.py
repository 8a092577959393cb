"""End to end: `kvplan serve` as a real process on loopback, and the Docker image's CMD line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import free_port, running_server, server_env
from tests.test_dockerfile import cmd_argv, healthcheck_argv, runtime_env

QUESTION_48_GIB = {
    "model": "meta-llama/Llama-3.1-8B",
    "kv_cache_dtype": "bf16",
    "context_tokens": 8192,
    "kv_budget_bytes": 51539607552,
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    tmp = tmp_path_factory.mktemp("serve")
    port = free_port()
    argv = [sys.executable, "-m", "planner", "serve", "--host", "127.0.0.1", "--port", str(port)]
    log = tmp / "server.log"
    with running_server(argv, server_env(tmp / "data"), port, log) as base_url:
        yield base_url, log


def test_48_gib_question_over_http(served: tuple[str, Path]) -> None:
    base_url, _ = served
    response = httpx.post(f"{base_url}/api/v1/plan", json=QUESTION_48_GIB)
    assert response.status_code == 200
    assert response.json()["capacity"]["max_requests"] == 47
    assert response.json()["capacity"]["engine_reported_concurrency"] == 48.0
    assert "server" not in response.headers  # uvicorn runs with server_header=False
    assert response.headers["x-content-type-options"] == "nosniff"


def test_catalog_sweep_and_ops_over_http(served: tuple[str, Path]) -> None:
    base_url, _ = served
    with httpx.Client(base_url=base_url) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        assert http.get("/readyz").json()["status"] == "ready"
        models = http.get("/api/v1/models").json()
        assert "meta-llama/Llama-3.1-8B" in [m["id"] for m in models]
        assert http.get("/api/v1/models/meta-llama/Llama-3.1-8B").status_code == 200
        assert "H100-SXM-80GB" in [g["id"] for g in http.get("/api/v1/gpus").json()]
        sweep = http.post(
            "/api/v1/sweep",
            json={
                "base": {k: v for k, v in QUESTION_48_GIB.items() if k != "context_tokens"},
                "context_tokens": [8192, 16384],
                "tensor_parallel_sizes": [1, 2],
            },
        )
        assert sweep.status_code == 200
        assert sweep.json()["points"][0]["max_requests"] == 47
        bad = http.post(
            "/api/v1/plan", content=b'{"model": NaN}', headers={"content-type": "application/json"}
        )
        assert bad.status_code == 400
        assert bad.headers["content-type"] == "application/problem+json"
        metrics = http.get("/metrics", follow_redirects=False)
        assert metrics.status_code == 200
        assert 'kvplan_plans_total{outcome="ok"}' in metrics.text
        assert 'route="/api/v1/plan"' in metrics.text
        docs = http.get("/docs")
        assert docs.status_code == 200 and "swagger-ui-bundle.js" in docs.text
        assert http.get("/api/v1/openapi.json").json()["info"]["title"] == "kvplan"


def test_logs_are_json_lines_with_request_id(served: tuple[str, Path]) -> None:
    base_url, log = served
    httpx.get(f"{base_url}/api/v1/gpus", headers={"X-Request-ID": "e2e-trace-1"})

    def logged() -> bool:
        lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        return any(
            line.get("request_id") == "e2e-trace-1" and line["route"] == "/api/v1/gpus"
            for line in lines
        )

    # The access line is written once the answer has gone out: on a busy machine the client
    # can read the log first. Wait for it (bounded), rather than race it.
    deadline = time.monotonic() + 5
    while not logged() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert logged()


def test_bad_settings_fail_fast_with_the_variable_named(tmp_path: Path) -> None:
    env = server_env(tmp_path, KVPLAN_PORT="eighty", KVPLAN_ADMIN_TOKEN="changeme")
    result = subprocess.run(
        [sys.executable, "-m", "planner", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    problem = json.loads(result.stderr.strip().splitlines()[-1])
    assert "KVPLAN_PORT" in problem["detail"] and "KVPLAN_ADMIN_TOKEN" in problem["detail"]
    assert "changeme" not in result.stderr  # the rejected secret is not echoed
    assert "Traceback" not in result.stderr


def test_docker_cmd_line_serves_and_passes_its_healthcheck(tmp_path: Path) -> None:
    # The image's exact CMD and HEALTHCHECK argv, with the image's ENV; only the bind address
    # moves from 0.0.0.0:8000 to a free loopback port (the same variables the image sets).
    port = free_port()
    venv_bin = str(Path(sys.executable).parent)
    image_env = runtime_env()
    image_env.pop("PATH")  # /opt/venv/bin:$PATH; here the venv is this interpreter's
    env = server_env(tmp_path / "data", **image_env)
    env.update(
        KVPLAN_HOST="127.0.0.1",
        KVPLAN_PORT=str(port),
        KVPLAN_DATA_DIR=str(tmp_path / "data"),
        PATH=os.pathsep.join([venv_bin, os.environ.get("PATH", "")]),
    )
    with running_server(cmd_argv(), env, port, tmp_path / "log") as base_url:
        assert httpx.post(f"{base_url}/api/v1/plan", json=QUESTION_48_GIB).status_code == 200
        check = subprocess.run(healthcheck_argv(), env=env, capture_output=True, timeout=30)
        assert check.returncode == 0, check.stderr
    # With the server gone the healthcheck must fail.
    check = subprocess.run(healthcheck_argv(), env=env, capture_output=True, timeout=30)
    assert check.returncode != 0
