"""`POST /api/v1/reconcile`: a fixture log reconciles; bad input is a clear 4xx, never a 5xx."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from planner.app import create_app
from planner.settings import Settings
from tests.core.test_logparse import load_fixtures

PROBLEM = "application/problem+json"
FIXTURES = {f["id"]: f for f in load_fixtures()}
QWEN3_14B_LOG = "\n".join(FIXTURES["vllm-v1-qwen3-14b-lmcache1739"]["log_lines"])
QWEN3_14B = {
    "num_hidden_layers": 40,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "torch_dtype": "bfloat16",
}


def post(client: TestClient, body: object) -> tuple[int, dict[str, object], str]:
    response = client.post("/api/v1/reconcile", json=body)
    return response.status_code, response.json(), response.headers["content-type"]


def test_fixture_reconciles(client: TestClient) -> None:
    status, body, media = post(client, {"log": QWEN3_14B_LOG, "model": QWEN3_14B})
    assert (status, media) == (200, "application/json")
    # Fixture vllm-v1-qwen3-14b-lmcache1739: 2,666 blocks -> 42,656 tokens; 1.30x.
    assert body["summary"] == {
        "equal": 2,
        "consistent": 0,
        "different": 0,
        "explained": 0,
        "not_recomputable": 0,
    }
    checks = body["checks"]
    assert isinstance(checks, list) and checks[0]["predicted"] == 42656
    assert checks[0]["blocks_range"] == [2664, 2668]


def test_catalog_model_and_settings(client: TestClient) -> None:
    fixture = FIXTURES["trtllm-llama31-8b-fp8-rtx5090-trtllm4275"]
    status, body, _ = post(
        client,
        {
            "log": "\n".join(fixture["log_lines"]),
            "model": "meta-llama/Llama-3.1-8B",
            "engine": "trtllm",
            "settings": {"kv_cache_dtype": "fp8", "free_gpu_memory_fraction": 0.9},
        },
    )
    assert status == 200
    assert [c["status"] for c in body["checks"]] == ["consistent", "equal", "equal"]  # type: ignore[union-attr]


def _problem(
    client: TestClient, body: bytes, content_type: str = "application/json"
) -> tuple[int, dict[str, object]]:
    response = client.post(
        "/api/v1/reconcile", content=body, headers={"content-type": content_type}
    )
    assert response.headers["content-type"] == PROBLEM, response.text
    problem = response.json()
    assert problem["status"] == response.status_code
    assert problem["title"] and problem["detail"]
    return response.status_code, problem


@pytest.mark.parametrize(
    ("log", "field", "words"),
    [
        ("", "log", "empty"),
        ("   \n\n", "log", "empty"),
        ("GPU KV cache size: 1 tokens\x00\x01\x02", "log", "binary"),
        ("hello world\nnothing here\n", "log", "no KV-cache start-up line"),
    ],
    ids=["empty", "blank", "binary", "unrecognised"],
)
def test_bad_logs(client: TestClient, log: str, field: str, words: str) -> None:
    status, problem = _problem(client, json.dumps({"log": log}).encode())
    assert status == 422
    assert words in str(problem["detail"])
    assert [e["field"] for e in problem["errors"]] == [field]  # type: ignore[union-attr]


def test_another_engine_than_claimed(client: TestClient) -> None:
    status, problem = _problem(
        client, json.dumps({"log": QWEN3_14B_LOG, "engine": "sglang"}).encode()
    )
    assert status == 422
    assert "vLLM log" in str(problem["detail"]) and "SGLang" in str(problem["detail"])
    assert [e["field"] for e in problem["errors"]] == ["engine"]  # type: ignore[union-attr]


def test_ten_megabytes_is_413(client: TestClient) -> None:
    body = json.dumps({"log": "GPU KV cache size: 1 tokens\n" * 400_000}).encode()
    assert len(body) > 10_000_000
    status, _ = _problem(client, body)
    assert status == 413


def test_log_over_two_mib_is_422_when_the_body_limit_allows(tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=tmp_path, max_body_bytes=8 << 20))
    with TestClient(app, raise_server_exceptions=False) as client:
        body = json.dumps({"log": "x" * (3 << 20)}).encode()
        status, problem = _problem(client, body)
    assert status == 422
    assert problem["errors"][0]["field"] == "log"  # type: ignore[index]


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        (b"not json", 400, None),
        (b'{"log": 5}', 422, "log"),
        (b'{"log": "x", "unknown": 1}', 422, "unknown"),
        (
            b'{"log": "x", "settings": {"tensor_parallel_size": "2"}}',
            422,
            "settings.tensor_parallel_size",
        ),
        (
            b'{"log": "x", "settings": {"gpu_memory_utilization": 1.5}}',
            422,
            "settings.gpu_memory_utilization",
        ),
        (b'{"log": "x", "engine": "transformers"}', 422, "engine"),
        (b'{"log": "Available KV cache memory: 1.00 GiB", "model": "no/such"}', 422, "model"),
        (
            b'{"log": "Available KV cache memory: 1.00 GiB", "model": {"num_hidden_layers": 2}}',
            422,
            "model.num_attention_heads",
        ),
    ],
)
def test_invalid_bodies(client: TestClient, body: bytes, status: int, field: str | None) -> None:
    got, problem = _problem(client, body)
    assert got == status
    if field is not None:
        assert field in [e["field"] for e in problem["errors"]]  # type: ignore[union-attr]


def test_wrong_media_type(client: TestClient) -> None:
    status, _ = _problem(client, QWEN3_14B_LOG.encode(), "text/plain")
    assert status == 415


def test_log_text_is_not_echoed_raw(client: TestClient) -> None:
    log = (
        "INFO non-default args: {'model': 'x', 'api_key': ['sk-very-secret'], 'max_model_len': 8}\n"
        "Available KV cache memory: 40.00 GiB\nGPU KV cache size: 327,680 tokens\n"
    )
    response = client.post(
        "/api/v1/reconcile", json={"log": log, "model": "meta-llama/Llama-3.1-8B"}
    )
    assert response.status_code == 200
    assert "sk-very-secret" not in response.text
