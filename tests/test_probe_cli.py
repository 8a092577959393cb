"""`kvplan probe`: JSON fields, problem+json with exit 2 on bad input, --report to a service."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import typer
from fastapi import FastAPI
from pydantic import SecretStr
from starlette.testclient import TestClient
from typer.testing import CliRunner

import planner.probe.run as probe_run
from planner.api import calibrations
from planner.api.problems import install_problem_handlers
from planner.cli import build_app
from planner.cli import probe as probe_cli
from planner.probe import CalibrationIn
from planner.store import Store

runner = CliRunner()
TOKEN = "t0k3n-for-tests-0123456789"
CANNED = CalibrationIn.model_validate(
    {
        "device_name": "CPU: test (2 threads)",
        "backend": "numpy-cpu",
        "copy_bandwidth_bytes_per_s": 5e9,
        "decode_bandwidth_bytes_per_s": 2e9,
        "fixed_overhead_seconds": 1e-4,
        "device_kind": "cpu",
        "dtype": "fp32",
        "half_performance_bytes": 2e5,
        "flags": ["cpu_figures"],
        "notes": ["CPU figures: test"],
    }
)
JSON_FIELDS = {
    "backend",
    "device_name",
    "copy_bandwidth_bytes_per_s",
    "decode_bandwidth_bytes_per_s",
    "fixed_overhead_seconds",
    "points",
    "flags",
}


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    # The CLI as `kvplan probe` builds it: its root callback resets the error style before each
    # command, as every real invocation starts (a bare Typer app kept the previous test's).
    return build_app(only="probe")


@pytest.fixture
def canned(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def fake(device: str, max_seconds: float, **kwargs: Any) -> CalibrationIn:
        calls.append({"device": device, "max_seconds": max_seconds, **kwargs})
        return CANNED

    monkeypatch.setattr(probe_run, "run_probe", fake)
    return calls


def test_json_carries_the_contract_fields(app: typer.Typer, canned: list[dict[str, Any]]) -> None:
    result = runner.invoke(app, ["probe", "--device", "cpu", "--json", "--max-seconds", "7"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert JSON_FIELDS <= body.keys()
    assert body["backend"] == "numpy-cpu"
    assert canned[0]["device"] == "cpu" and canned[0]["max_seconds"] == 7


def test_human_output_labels_units_and_cpu(app: typer.Typer, canned: list[dict[str, Any]]) -> None:
    result = runner.invoke(app, ["probe", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert "CPU figures" in result.stdout
    assert "5.00 GB/s" in result.stdout and "2.00 GB/s" in result.stdout
    assert "100.0 us" in result.stdout
    assert "decimal" in result.stdout


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--device", "gpu"], "device"),
        (["--max-seconds", "abc"], "max_seconds"),
        (["--max-seconds", "1e9"], "max_seconds"),
        (["--num-kv-heads", "5"], "attention_shape"),
        (["--max-memory", "lots"], "max_memory"),
        (["--report", "ftp://planner"], "report"),
        (["--report", "http://planner:8000"], "token"),
    ],
)
def test_bad_input_is_problem_json_exit_2(
    app: typer.Typer,
    canned: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    field: str,
) -> None:
    monkeypatch.delenv("KVPLAN_ADMIN_TOKEN", raising=False)
    result = runner.invoke(app, ["probe", *args])
    assert result.exit_code == 2
    problem = json.loads(result.stderr)
    assert problem["errors"][0]["field"] == field
    assert "Traceback" not in result.stderr
    assert canned == []  # nothing measured on bad input


def test_report_posts_with_bearer(
    app: typer.Typer, canned: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def fake_post(url: str, **kwargs: Any) -> httpx.Response:
        seen.update(url=url, **kwargs)
        return httpx.Response(201, json={**json.loads(kwargs["content"]), "id": "abc"})

    monkeypatch.setattr(httpx, "post", fake_post)
    result = runner.invoke(
        app, ["probe", "--json", "--report", "http://planner:8000/", "--token", TOKEN]
    )
    assert result.exit_code == 0, result.output
    assert seen["url"] == "http://planner:8000/api/v1/calibrations"
    assert seen["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert seen["timeout"] > 0
    assert CalibrationIn.model_validate_json(seen["content"]) == CANNED
    assert json.loads(result.stdout)["backend"] == "numpy-cpu"  # stdout stays pure JSON
    assert "id abc" in result.stderr


@pytest.fixture
def service(tmp_path: Path) -> Iterator[TestClient]:
    api = FastAPI()
    install_problem_handlers(api)
    api.include_router(calibrations.router, prefix="/api/v1")
    api.state.settings = SimpleNamespace(admin_token=SecretStr(TOKEN))
    api.state.store = Store(tmp_path)
    yield TestClient(api, raise_server_exceptions=False)
    api.state.store.close()


def test_report_lands_in_the_service_store(service: TestClient) -> None:
    endpoint = "http://testserver/api/v1/calibrations"
    stored = probe_cli.report(endpoint, TOKEN, CANNED, client=service)
    assert stored["id"]
    got = service.get(f"/api/v1/calibrations/{stored['id']}").json()
    assert got["decode_bandwidth_bytes_per_s"] == CANNED.decode_bandwidth_bytes_per_s


def test_report_refused_is_exit_1_with_the_problem(
    service: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(typer.Exit) as info:
        probe_cli.report(
            "http://testserver/api/v1/calibrations", "wrong-token-000000", CANNED, client=service
        )
    assert info.value.exit_code == 1
    assert json.loads(capsys.readouterr().err)["status"] == 401


def test_report_unreachable_is_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(url: str, **kwargs: Any) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    monkeypatch.setattr(httpx, "post", refuse)
    with pytest.raises(typer.Exit) as info:
        probe_cli.report("http://127.0.0.1:9/api/v1/calibrations", TOKEN, CANNED)
    assert info.value.exit_code == 1
    assert "could not reach" in json.loads(capsys.readouterr().err)["detail"]


def test_real_cpu_probe_through_the_command(app: typer.Typer) -> None:
    # The real backend with a short budget: the command's plumbing, not the figures.
    result = runner.invoke(
        app, ["probe", "--device", "cpu", "--json", "--max-seconds", "3", "--max-memory", "64MiB"]
    )
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert JSON_FIELDS <= body.keys()
    assert body["device_kind"] == "cpu" and "cpu_figures" in body["flags"]


# --- --validate ---------------------------------------------------------------------------------


@pytest.fixture
def tiny_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import planner.probe.validate as validate_module
    from tests.probe.test_probe_validate import TINY_PLAN

    monkeypatch.setattr(validate_module, "default_plan", lambda device: TINY_PLAN)


def test_validate_prints_the_table_and_the_stored_records(
    app: typer.Typer, tiny_validation: None
) -> None:
    result = runner.invoke(app, ["probe", "--device", "cpu", "--validate", "--max-seconds", "5"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "| point (batch × context) | role | measured | calibrated | error |" in out
    assert "held-out |error|: calibrated median" in out
    assert "planned through POST /api/v1/plan with calibration_id" in out
    assert "validated calibration" in result.stderr


def test_validate_json_is_the_validated_calibration(
    app: typer.Typer, tiny_validation: None
) -> None:
    result = runner.invoke(
        app, ["probe", "--device", "cpu", "--validate", "--json", "--max-seconds", "5"]
    )
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    v = body["validation"]
    assert {"median_abs_error", "max_abs_error", "points", "plan_calibration_id"} <= v.keys()
    assert {p["role"] for p in v["points"]} == {"training", "held_out"}
    assert body["step_terms"]["training_points"] == 3
    assert body["attention_shape"] == {"num_q_heads": 4, "num_kv_heads": 2, "head_dim": 16}


def test_validate_refuses_a_shape_flag(app: typer.Typer, canned: list[dict[str, Any]]) -> None:
    result = runner.invoke(app, ["probe", "--validate", "--num-kv-heads", "4"])
    assert result.exit_code == 2
    assert json.loads(result.stderr)["errors"][0]["field"] == "attention_shape"
    assert canned == []
