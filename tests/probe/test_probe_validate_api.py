"""`POST /api/v1/probe` with `"validate": true`: the stored record carries the table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi import FastAPI
from pydantic import SecretStr
from starlette.testclient import TestClient

pytest.importorskip("torch")
pytest.importorskip("transformers")

import planner.probe.validate as validate_module
from planner.api import calibrations
from planner.api.problems import install_problem_handlers
from planner.store import Store
from tests.probe.test_probe_validate import TINY_PLAN

TOKEN = "t0k3n-for-tests-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setattr(validate_module, "default_plan", lambda device: TINY_PLAN)
    app = FastAPI()
    install_problem_handlers(app)
    app.include_router(calibrations.router, prefix="/api/v1")
    app.state.settings = SimpleNamespace(admin_token=SecretStr(TOKEN))
    app.state.store = Store(tmp_path)
    yield TestClient(app, raise_server_exceptions=False)
    app.state.store.close()


def test_validate_stores_probe_and_validated_records(client: TestClient) -> None:
    resp = client.post("/api/v1/probe", json={"device": "cpu", "validate": True}, headers=AUTH)
    assert resp.status_code == 201, resp.text
    body = resp.json()
    v = body["validation"]
    assert v["plan_path"] == "plan() with the stored calibration_id, as POST /api/v1/plan runs it"
    stored = client.get(f"/api/v1/calibrations/{body['id']}").json()
    assert stored["validation"] == v
    probe = client.get(f"/api/v1/calibrations/{v['plan_calibration_id']}").json()
    assert probe["decode_bandwidth_bytes_per_s"] == body["decode_bandwidth_bytes_per_s"]
    assert probe.get("validation") is None and probe.get("step_terms") is None
    assert resp.headers["Location"].endswith(body["id"])


def test_validate_refuses_a_shape(client: TestClient) -> None:
    resp = client.post(
        "/api/v1/probe",
        json={"device": "cpu", "validate": True, "attention_shape": {"num_kv_heads": 4}},
        headers=AUTH,
    )
    assert resp.status_code == 422
    assert resp.json()["errors"][0]["field"] == "device"


def test_a_stubbed_probe_runs_no_model(client: TestClient) -> None:
    from planner.probe import CalibrationIn

    canned = CalibrationIn(
        device_name="stub",
        backend="stub",
        copy_bandwidth_bytes_per_s=1e9,
        decode_bandwidth_bytes_per_s=1e9,
        fixed_overhead_seconds=0.0,
    )
    app = client.app
    app.dependency_overrides[calibrations.get_probe_runner] = lambda: lambda body: canned  # type: ignore[attr-defined]
    resp = client.post("/api/v1/probe", json={"device": "cpu", "validate": True}, headers=AUTH)
    assert resp.status_code == 201, resp.text
    assert resp.json()["device_name"] == "stub" and resp.json()["validation"] is None
