"""`POST /api/v1/plan`: the 48 GiB question, strict parsing, and the exact serialization."""

from __future__ import annotations

from starlette.testclient import TestClient
from typer.testing import CliRunner

from planner.cli import app as cli_app
from planner.core.schema import PlanRequest
from planner.service import plan
from tests.api.conftest import QUESTION_48_GIB


def test_48_gib_question(client: TestClient) -> None:
    # DESIGN.md / seeds: Llama-3.1-8B, bf16, 8k context, 48 GiB → 47 requests (vLLM's null block),
    # while vLLM's start-up log prints "Maximum concurrency ... 48.00x".
    response = client.post("/api/v1/plan", json=QUESTION_48_GIB)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    capacity = response.json()["capacity"]
    assert capacity["max_requests"] == 47
    assert capacity["engine_reported_concurrency"] == 48.0
    assert response.json()["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2  # 2·L·Hkv·d·bytes


def test_body_is_plan_model_dump_json(client: TestClient) -> None:
    response = client.post("/api/v1/plan", json=QUESTION_48_GIB)
    expected = plan(PlanRequest.model_validate(QUESTION_48_GIB)).model_dump_json()
    assert response.content == expected.encode()


def test_cli_and_api_give_identical_bytes(client: TestClient) -> None:
    body = (
        b'{"model": "meta-llama/Llama-3.1-8B", "kv_cache_dtype": "fp8", '
        b'"requests": [{"context_tokens": 4096, "count": 3}, {"context_tokens": 32768}], '
        b'"gpu": "H100-SXM-80GB", "tensor_parallel_size": 2}'
    )
    api = client.post("/api/v1/plan", content=body, headers={"content-type": "application/json"})
    assert api.status_code == 200
    cli = CliRunner().invoke(cli_app, ["plan", "--request", "-"], input=body)
    assert cli.exit_code == 0, cli.output
    assert cli.stdout.encode() == api.content + b"\n"


def test_charset_param_and_problem_json_accepted(client: TestClient) -> None:
    for content_type in ("application/json; charset=utf-8", "application/merge-patch+json"):
        response = client.post(
            "/api/v1/plan",
            content=b'{"model": "meta-llama/Llama-3.1-8B", "kv_budget_bytes": 1073741824}',
            headers={"content-type": content_type},
        )
        assert response.status_code == 200, content_type
