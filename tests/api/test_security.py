"""Security headers on every response, errors included; Swagger UI from static/, no CDN."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient

from planner.api.security import SECURITY_HEADERS
from planner.app import static_dir

REQUESTS = [
    ("GET", "/healthz", None),
    ("GET", "/api/v1/models", None),
    ("GET", "/api/v1/openapi.json", None),
    ("GET", "/docs", None),
    ("GET", "/static/swagger/init.js", None),
    ("GET", "/metrics", None),
    ("GET", "/nope", None),  # 404
    ("DELETE", "/api/v1/plan", None),  # 405
    ("POST", "/api/v1/plan", b"{"),  # 400
    ("POST", "/api/v1/plan", b"{}"),  # 422
    ("POST", "/api/v1/plan", b"[" * (2 << 20)),  # 413
]


@pytest.mark.parametrize(
    ("method", "path", "body"), REQUESTS, ids=[f"{m} {p}" for m, p, _ in REQUESTS]
)
def test_security_headers(client: TestClient, method: str, path: str, body: bytes | None) -> None:
    response = client.request(
        method, path, content=body, headers={"content-type": "application/json"}
    )
    for name, value in SECURITY_HEADERS.items():
        assert response.headers.get(name) == value, (name, response.status_code)
    csp = response.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "server" not in response.headers
    assert response.headers["x-request-id"]


def test_unhandled_error_is_opaque_problem_with_headers(app: FastAPI) -> None:
    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("secret internals /etc/passwd")

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom", headers={"X-Request-ID": "trace-42"})
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert "secret internals" not in response.text
    assert "Traceback" not in response.text
    assert response.headers["x-request-id"] == "trace-42"
    for name, value in SECURITY_HEADERS.items():
        assert response.headers.get(name) == value


def test_docs_page_uses_only_same_origin_files(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200
    assert "http" not in page.text.replace("http-equiv", "")  # no absolute URL, no CDN
    assert "<script>" not in page.text and "<style" not in page.text  # nothing inline
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "init.js"):
        assert f"/static/swagger/{asset}" in page.text
        assert client.get(f"/static/swagger/{asset}").status_code == 200
    assert "/api/v1/openapi.json" in client.get("/static/swagger/init.js").text


def test_vendored_swagger_is_small() -> None:
    files = list((static_dir() / "swagger").iterdir())
    assert not [f.name for f in files if f.name.endswith(".map")]
    assert sum(f.stat().st_size for f in files) < 2_500_000
