"""Issue 25, item 1 in Chromium: a budget given beside a GPU reads the same on the page as from
the API and the CLI (tests/api/test_explicit_budget.py has the rule's sources): with the weights
over the GPU the engine does not start, and a budget above the GPU is the budget field's error."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from tests.web.conftest import Session

pytestmark = pytest.mark.browser

GiB = 1 << 30
URL = "/?model=meta-llama/Llama-3.1-8B&kv_cache_dtype=bf16&context_tokens=8192&gpu=L40S-48GB"


def api(client: TestClient, budget_gib: int) -> dict[str, object]:
    r = client.post("/api/v1/plan", json={
        "model": "meta-llama/Llama-3.1-8B", "kv_cache_dtype": "bf16", "context_tokens": 8192,
        "gpu": "L40S-48GB", "kv_budget_bytes": budget_gib * GiB})  # fmt: skip
    body: dict[str, object] = r.json()
    return body


def test_weights_over_the_gpu_do_not_start_on_the_page(
    session: Session, client: TestClient
) -> None:
    answer = api(client, 40)
    error = answer["capacity"]["start_error"]  # type: ignore[index]
    assert isinstance(error, str) and error.startswith("out of memory allocating the KV cache")
    session.goto(URL + "&kv_budget_gib=40")
    note = session.page.locator('#answer li[data-code="engine.refuses_to_start"]')
    note.wait_for(state="visible")
    assert error.replace("'", "’") in note.inner_text().replace("'", "’")


def test_a_budget_above_the_gpu_is_the_budget_fields_error(
    session: Session, client: TestClient
) -> None:
    problem = api(client, 48)
    msg = problem["errors"][0]["msg"]  # type: ignore[index]
    session.goto(URL + "&kv_budget_gib=48")
    error = session.page.locator("#e-kv_budget_gib")
    error.wait_for(state="visible")
    assert msg in error.inner_text()
    assert session.page.locator("#f-kv_budget_gib").get_attribute("aria-invalid") == "true"
