"""`POST /api/v1/plan` with a speculative draft and with KV-sharing layers: the fields in and
out, and problem+json naming the speculative_config key that is wrong."""

from __future__ import annotations

from starlette.testclient import TestClient

from tests.core.test_reconcile_draft import EAGLE_HEAD

LLAMA = "meta-llama/Llama-3.1-8B"


def test_draft_is_sized_and_described(client: TestClient) -> None:
    body = {"model": LLAMA, "engine_version": "0.9.1", "block_size": 16,
            "kv_budget_bytes": round(51.63 * (1 << 30)), "context_tokens": 131072,
            "speculative_config": {"method": "eagle", "model": EAGLE_HEAD,
                                   "num_speculative_tokens": 3}}  # fmt: skip
    r = client.post("/api/v1/plan", json=body)
    assert r.status_code == 200
    out = r.json()
    # vllm#19996's log: 410,128 tokens, 3.13x with the EAGLE layer counted
    assert out["capacity"]["engine_reported_tokens"] == 410128
    assert out["capacity"]["engine_reported_concurrency"] == 3.13
    assert out["model"]["draft"]["kv_layers"] == 1
    assert out["model"]["draft"]["lookahead_tokens"] == 6
    assert any(n["code"] == "speculative.draft_layers" for n in out["notes_detail"])


def test_unknown_speculative_key_is_a_422_naming_it(client: TestClient) -> None:
    body = {"model": LLAMA, "context_tokens": 8192, "kv_budget_bytes": 1 << 34,
            "speculative_config": {"method": "medusa", "num_speculative_tokens": 3}}  # fmt: skip
    r = client.post("/api/v1/plan", json=body)
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "speculative_config" in r.text and "method" in r.text


def test_missing_draft_is_a_4xx_naming_the_field(client: TestClient) -> None:
    body = {"model": LLAMA, "context_tokens": 8192, "kv_budget_bytes": 1 << 34,
            "speculative_config": {"method": "eagle3", "num_speculative_tokens": 3}}  # fmt: skip
    r = client.post("/api/v1/plan", json=body)
    assert 400 <= r.status_code < 500
    fields = [e["field"] for e in r.json()["errors"]]
    assert fields == ["speculative_config.model"]


def test_a_method_of_the_wrong_type_is_a_4xx_naming_it(client: TestClient) -> None:
    # Found by schemathesis: a non-string method reached the MTP alias check and gave a 500.
    body = {"model": "meta-llama/Llama-3.1-8B", "context_tokens": 8192, "kv_budget_bytes": 1 << 34}
    for method in ({}, [], 3):
        r = client.post("/api/v1/plan", json={**body, "speculative_config": {"method": method}})
        assert r.status_code == 422, r.text
        assert "speculative_config.method" in r.text
