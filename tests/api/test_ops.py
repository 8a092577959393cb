"""`/healthz`, `/readyz`, `/metrics`: liveness, readiness with reasons, Prometheus without 307."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from planner.api import ops
from tests.api.conftest import QUESTION_48_GIB


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_healthz(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_ready_after_startup(client: TestClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    checks = {"catalog": "ok", "store": "ok", "capacity": "ok"}
    assert response.json() == {"status": "ready", "checks": checks}


def test_readyz_503_when_store_fails(client: TestClient, app: FastAPI) -> None:
    class BrokenStore:
        def ping(self) -> None:
            raise OSError("disk gone")

    app.state.store = BrokenStore()
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["retry-after"] == "5"
    problem = response.json()
    assert [e["field"] for e in problem["errors"]] == ["checks.store"]
    assert "disk gone" not in response.text  # the reason's class, not internals


def test_readyz_503_when_store_not_open(app: FastAPI) -> None:
    # Without the lifespan (e.g. httpx.ASGITransport) the store is never opened.
    response = TestClient(app).get("/readyz")
    assert response.status_code == 503
    assert "store" in response.json()["detail"]


def test_readyz_503_when_catalog_fails(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> bool:
        raise ValueError("models.json: bad entry")

    monkeypatch.setattr(ops.catalog, "ready", broken)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert [e["field"] for e in response.json()["errors"]] == ["checks.catalog"]


def test_metrics_is_a_plain_route(client: TestClient) -> None:
    response = client.get("/metrics", follow_redirects=False)
    assert response.status_code == 200  # not 307 to /metrics/
    assert response.headers["content-type"].startswith("text/plain")


def test_metrics_count_by_route_template_and_plan_outcome(client: TestClient) -> None:
    client.post("/api/v1/plan", json=QUESTION_48_GIB)
    client.post("/api/v1/plan", json={"model": "no/such"})
    client.post("/api/v1/plan", content=b"{", headers={"content-type": "application/json"})
    client.get("/api/v1/models/meta-llama/Llama-3.1-8B")
    client.get("/api/v1/models/mistralai/Mixtral-8x7B-v0.1")
    client.get("/healthz")
    samples = _samples(client.get("/metrics").text)

    def requests(route: str, status: str, method: str = "GET") -> float:
        labels = (("method", method), ("route", route), ("status", status))
        return samples.get(("kvplan_http_requests_total", labels), 0.0)

    assert requests("/api/v1/plan", "200", "POST") == 1
    assert requests("/api/v1/plan", "422", "POST") == 1
    assert requests("/api/v1/plan", "400", "POST") == 1
    # Both model ids land on one series: the template, never the raw path.
    assert requests("/api/v1/models/{model_id:path}", "200") == 2
    assert requests("/healthz", "200") == 0  # probes are not counted
    assert samples[("kvplan_plans_total", (("outcome", "ok"),))] == 1
    assert samples[("kvplan_plans_total", (("outcome", "unplannable"),))] == 1
    assert samples[("kvplan_plans_total", (("outcome", "invalid"),))] == 1
    latency = (
        "kvplan_http_request_duration_seconds_count",
        (("method", "POST"), ("route", "/api/v1/plan")),
    )
    assert samples[latency] == 3


def test_each_app_has_its_own_registry(app: FastAPI) -> None:
    from planner.app import create_app

    other = create_app(app.state.settings)
    assert other.state.metrics.registry is not app.state.metrics.registry


def test_readyz_503_when_the_database_file_vanished(client: TestClient, app: FastAPI) -> None:
    path = app.state.store.path
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert "vanished" in response.json()["detail"]
