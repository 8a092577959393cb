"""The OpenAPI document: where it lives, and every status each operation can return."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

PROBLEM = "application/problem+json"


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, op)
        for path, item in spec["paths"].items()
        for method, op in item.items()
    ]


def test_served_under_api_v1_only(client: TestClient) -> None:
    assert client.get("/api/v1/openapi.json").status_code == 200
    assert client.get("/openapi.json").status_code == 404
    assert client.get("/redoc").status_code == 404


def test_every_operation_documents_its_error_statuses(client: TestClient) -> None:
    spec = client.get("/api/v1/openapi.json").json()
    operations = _operations(spec)
    paths = {path for _, path, _ in operations}
    assert {
        "/api/v1/plan",
        "/api/v1/sweep",
        "/api/v1/models",
        "/api/v1/models/{model_id}",
        "/api/v1/gpus",
        "/healthz",
        "/readyz",
        "/metrics",
    } <= paths
    for method, path, op in operations:
        responses = op["responses"]
        expected = {"405", "413", "422"}
        if op.get("requestBody", {}).get("content", {}).get("application/json"):
            expected |= {"400", "415"}
        missing = expected - responses.keys()
        assert not missing, (method, path, missing)
        for status, response in responses.items():
            if status.startswith(("4", "5")) and status not in ("401", "403"):
                assert PROBLEM in response.get("content", {}), (method, path, status)
                assert "application/json" not in response["content"], (method, path, status)


def test_strict_bodies_are_documented(client: TestClient) -> None:
    spec = client.get("/api/v1/openapi.json").json()
    for path, schema in (("/api/v1/plan", "PlanRequest"), ("/api/v1/sweep", "SweepRequest")):
        body = spec["paths"][path]["post"]["requestBody"]
        assert body["required"] is True
        assert body["content"]["application/json"]["schema"] == {
            "$ref": f"#/components/schemas/{schema}"
        }
    plan_request = spec["components"]["schemas"]["PlanRequest"]
    assert plan_request["additionalProperties"] is False
    assert plan_request["required"] == ["model"]
    assert spec["paths"]["/readyz"]["get"]["responses"]["503"]


def test_docs_and_static_not_in_schema(client: TestClient) -> None:
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    assert "/docs" not in paths
    assert not [p for p in paths if p.startswith("/static")]
