"""`calibration_id` in a plan: the measured figures feed `bounds.calibrated`, beside the
datasheet floor (issue 5 acceptance), and an unknown id is a 422 naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from planner.app import create_app
from planner.settings import Settings

TOKEN = "calibrated-plan-token-0123456789"
RECORD = {
    "device_name": "NVIDIA H200",
    "backend": "sdpa-flash",
    "copy_bandwidth_bytes_per_s": 4.3e12,
    "decode_bandwidth_bytes_per_s": 4.0e12,
    "fixed_overhead_seconds": 2e-5,
}
PLAN = {
    "model": "meta-llama/Llama-3.1-8B",
    "kv_cache_dtype": "bf16",
    "gpu": "H200-141GB",
    "requests": [{"context_tokens": 8192, "count": 10}],
}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(Settings(data_dir=tmp_path, admin_token=TOKEN))
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def test_calibrated_estimate_beside_the_datasheet_floor(client: TestClient) -> None:
    stored = client.post(
        "/api/v1/calibrations", json=RECORD, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert stored.status_code == 201
    cid = stored.json()["id"]
    plain = client.post("/api/v1/plan", json=PLAN).json()["bounds"]
    resp = client.post("/api/v1/plan", json={**PLAN, "calibration_id": cid})
    assert resp.status_code == 200
    bounds = resp.json()["bounds"]
    assert bounds["source"] == "calibration"
    assert bounds["bandwidth_source"] == "gpu"
    assert not any("measured on" in n for n in resp.json()["notes"])  # same device family
    # The datasheet floor (4.8 TB/s) stays the hard lower bound, unchanged.
    assert bounds["bandwidth_bytes_per_s"] == 4.8e12
    assert bounds["decode_step_seconds"] == plain["decode_step_seconds"]
    cal = bounds["calibrated"]
    assert cal["device_name"] == "NVIDIA H200"
    assert cal["measured_at"] == stored.json()["measured_at"]
    # Σ t0 per attention call + KV bytes / BW_eff + weights / copy bandwidth (probe.md §4):
    kv = 10 * 8192 * 131072
    # A step streams every weight but the input embedding table, which it only indexes
    # (Llama-3.1-8B is untied: 128,256 × 4,096 × 2 B of its 8,030,261,248 × 2 B).
    weights = 8030261248 * 2 - 128256 * 4096 * 2
    expected = 32 * 2e-5 + kv / 4.0e12 + weights / 4.3e12
    assert cal["attention_calls"] == 32
    assert cal["decode_step_seconds"] == pytest.approx(expected, rel=1e-12)
    assert cal["decode_step_seconds"] > bounds["decode_step_seconds"]
    assert any("NVIDIA H200" in n for n in resp.json()["notes"])


def test_unknown_calibration_id_is_422_naming_it(client: TestClient) -> None:
    resp = client.post("/api/v1/plan", json={**PLAN, "calibration_id": "nope"})
    assert resp.status_code == 422
    assert resp.headers["content-type"].startswith("application/problem+json")
    assert [e["field"] for e in resp.json()["errors"]] == ["calibration_id"]


def test_a_calibration_from_another_device_is_called_out(client: TestClient) -> None:
    cpu = {
        **RECORD,
        "device_name": "AMD EPYC (2 threads)",
        "backend": "numpy-cpu",
        "copy_bandwidth_bytes_per_s": 2.0e10,
        "decode_bandwidth_bytes_per_s": 9.6e9,
        "fixed_overhead_seconds": 1.15e-4,
    }
    cid = client.post(
        "/api/v1/calibrations", json=cpu, headers={"Authorization": f"Bearer {TOKEN}"}
    ).json()["id"]
    body = client.post("/api/v1/plan", json={**PLAN, "calibration_id": cid}).json()
    assert any("measured on AMD EPYC" in n for n in body["notes"])


def test_a_validated_record_adds_its_step_terms(client: TestClient) -> None:
    # A record from `kvplan probe --validate` carries two fitted terms (issue 17): a cost per
    # layer, and a matmul rate whose time replaces the weight stream's once it is longer.
    validated = {**RECORD, "per_layer_overhead_seconds": 5e-6, "matmul_flops_per_s": 1e13}
    cid = client.post(
        "/api/v1/calibrations", json=validated, headers={"Authorization": f"Bearer {TOKEN}"}
    ).json()["id"]
    resp = client.post("/api/v1/plan", json={**PLAN, "calibration_id": cid})
    assert resp.status_code == 200
    cal = resp.json()["bounds"]["calibrated"]
    kv = 10 * 8192 * 131072
    weights = 8030261248 * 2 - 128256 * 4096 * 2
    # 2 FLOPs per parameter per token through every weight but the embedding lookup.
    matmul = 2 * (8030261248 - 128256 * 4096) * 10 / 1e13
    assert matmul > weights / 4.3e12  # compute-bound at this rate: the matmuls set the time
    expected = 32 * 2e-5 + kv / 4.0e12 + 32 * 5e-6 + matmul
    assert cal["decode_step_seconds"] == pytest.approx(expected, rel=1e-12)
    assert cal["per_layer_overhead_seconds"] == 5e-6 and cal["matmul_flops_per_s"] == 1e13
    assert cal["matmul_seconds"] == pytest.approx(matmul, rel=1e-12)
    codes = [n["code"] for n in resp.json()["notes_detail"]]
    assert "bounds.calibrated_terms" in codes
    # A plain probe record leaves the terms out: the bytes-only estimate of the test above.
    plain_id = client.post(
        "/api/v1/calibrations", json=RECORD, headers={"Authorization": f"Bearer {TOKEN}"}
    ).json()["id"]
    plain = client.post("/api/v1/plan", json={**PLAN, "calibration_id": plain_id}).json()
    assert plain["bounds"]["calibrated"]["per_layer_overhead_seconds"] is None
    assert plain["bounds"]["calibrated"]["decode_step_seconds"] < cal["decode_step_seconds"]
