"""`/api/v1/models`, `/models/{id}` (ids with a slash), `/gpus`, `/gpus/{id}`."""

from __future__ import annotations

from starlette.testclient import TestClient

from planner import catalog


def test_models_list_matches_catalog(client: TestClient) -> None:
    response = client.get("/api/v1/models")
    assert response.status_code == 200
    assert [m["id"] for m in response.json()] == [m.id for m in catalog.list_models()]


def test_model_id_with_slash(client: TestClient) -> None:
    response = client.get("/api/v1/models/meta-llama/Llama-3.1-8B")
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == "meta-llama/Llama-3.1-8B"
    assert body["config"]["num_key_value_heads"] == 8  # the published config.json


def test_unknown_model_is_404_problem(client: TestClient) -> None:
    response = client.get("/api/v1/models/nobody/nothing")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["errors"][0]["loc"] == ["path", "model_id"]
    assert "GET /api/v1/models" in problem["detail"]


def test_gpus(client: TestClient) -> None:
    gpus = client.get("/api/v1/gpus").json()
    assert "H100-SXM-80GB" in [g["id"] for g in gpus]
    h100 = client.get("/api/v1/gpus/H100-SXM-80GB").json()
    assert h100["memory_bytes"] == 80 * 2**30
    assert client.get("/api/v1/gpus/TPU-v9").status_code == 404
