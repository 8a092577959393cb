"""Swagger UI at /docs in a real browser: renders our OpenAPI under the CSP, same origin only."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import free_port, running_server, server_env

pytestmark = pytest.mark.browser


def test_swagger_ui_renders_without_csp_violations(browser: Any, tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "planner", "serve", "--host", "127.0.0.1", "--port", str(port)]
    with running_server(argv, server_env(tmp_path / "data"), port, tmp_path / "log") as base_url:
        context = browser.new_context()
        try:
            page = context.new_page()
            console: list[str] = []
            origins: set[str] = set()
            page.on("console", lambda msg: console.append(msg.text))
            page.on("request", lambda req: origins.add(req.url.split("/")[2]))
            page.goto(f"{base_url}/docs")
            page.wait_for_selector("#operations-plan-plan", timeout=15000)
            title = page.inner_text(".swagger-ui .info .title")
        finally:
            context.close()
    assert "kvplan" in title
    assert origins == {f"127.0.0.1:{port}"}  # no CDN, nothing off-host
    violations = [m for m in console if "Content Security Policy" in m or "Refused to" in m]
    assert not violations, violations
