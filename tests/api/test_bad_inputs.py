"""Bad inputs → 4xx application/problem+json naming what was wrong; never a 5xx."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from tests.api.conftest import QUESTION_48_GIB

PROBLEM = "application/problem+json"
MODEL = "meta-llama/Llama-3.1-8B"


def _with(**fields: object) -> bytes:
    return json.dumps({**QUESTION_48_GIB, **fields}).encode()


# (case id, raw body, expected status, expected errors[].field or None)
CASES: list[tuple[str, bytes, int, str | None]] = [
    ("missing model", b'{"kv_budget_bytes": 1024}', 422, "model"),
    ("null model", b'{"model": null}', 422, "model"),
    ("number model", b'{"model": 5}', 422, "model"),
    ("list model", b'{"model": ["a"]}', 422, "model"),
    ("unknown model id", b'{"model": "no/such-model"}', 422, "model"),
    ("context zero", _with(context_tokens=0), 422, "context_tokens"),
    ("context too long", _with(context_tokens=(1 << 24) + 1), 422, "context_tokens"),
    ("context bool", _with(context_tokens=True), 422, "context_tokens"),
    ("context string", _with(context_tokens="8192"), 422, "context_tokens"),
    ("context float", _with(context_tokens=8192.5), 422, "context_tokens"),
    ("negative budget", _with(kv_budget_bytes=-1), 422, "kv_budget_bytes"),
    ("budget over 1 PiB", _with(kv_budget_bytes=1 << 60), 422, "kv_budget_bytes"),
    (
        "huge int",
        b'{"model": "m", "kv_budget_bytes": 1' + b"0" * 400 + b"}",
        422,
        "kv_budget_bytes",
    ),
    ("tp zero", _with(tensor_parallel_size=0), 422, "tensor_parallel_size"),
    ("tp not dividing heads", _with(tensor_parallel_size=3), 422, "tensor_parallel_size"),
    ("utilization over 1", _with(gpu_memory_utilization=1.5), 422, "gpu_memory_utilization"),
    ("unknown engine", _with(engine="llama.cpp"), 422, "engine"),
    ("unknown field", _with(max_model_len=8192), 422, "max_model_len"),
    ("nested unknown field", _with(requests=[{"context_tokens": 8, "n": 2}]), 422, "requests[0].n"),
    ("too many request entries", _with(requests=[{"context_tokens": 8}] * 257), 422, "requests"),
    ("body is a list", json.dumps([QUESTION_48_GIB]).encode(), 422, None),
    ("invalid JSON", b'{"model": ', 400, None),
    ("empty body", b"", 400, None),
    ("trailing garbage", _with() + b" {}", 400, None),
    ("single quotes", b"{'model': 'x'}", 400, None),
    ("NaN", b'{"model": "m", "bandwidth_bytes_per_s": NaN}', 400, None),
    ("Infinity", b'{"model": "m", "bandwidth_bytes_per_s": Infinity}', 400, None),
    ("-Infinity", b'{"model": "m", "bandwidth_bytes_per_s": -Infinity}', 400, None),
    ("overflowing float", b'{"model": "m", "bandwidth_bytes_per_s": 1e400}', 400, None),
    ("NaN inside a config", b'{"model": {"num_hidden_layers": NaN}}', 400, None),
    ("overflow inside a config", b'{"model": {"rope_theta": 1e999}}', 400, None),
    ("not UTF-8", b'{"model": "\xff\xfe"}', 400, None),
    ("lone surrogate", b'{"model": "\\ud800"}', 400, None),
    ("deep nesting", b'{"model": ' + b"[" * 5000 + b"]" * 5000 + b"}", 400, None),
]


@pytest.mark.parametrize(
    ("body", "status", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_plan_body(client: TestClient, body: bytes, status: int, field: str | None) -> None:
    response = client.post(
        "/api/v1/plan", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["status"] == status
    assert problem["title"] and problem["detail"] and problem["type"]
    assert problem["errors"], "every 4xx names what was wrong in errors[]"
    if field is not None:
        fields = [e["field"] for e in problem["errors"]]
        assert field in fields, fields
        for error in problem["errors"]:
            assert error["loc"] and error["msg"]


def test_errors_do_not_echo_input(client: TestClient) -> None:
    secret = "sk-not-for-logs-or-errors"
    response = client.post("/api/v1/plan", json={"model": MODEL, "calibration_id": 5, "x": secret})
    assert response.status_code == 422
    assert secret not in response.text


def test_wrong_content_type(client: TestClient) -> None:
    response = client.post("/api/v1/plan", content=_with(), headers={"content-type": "text/plain"})
    assert response.status_code == 415
    assert response.headers["content-type"] == PROBLEM
    form = client.post("/api/v1/plan", data={"model": MODEL})
    assert form.status_code == 415


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_wrong_method(client: TestClient, method: str) -> None:
    response = client.request(method, "/api/v1/plan")
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.headers["content-type"] == PROBLEM
    assert method in response.json()["detail"]


def test_allow_lists_every_route_at_the_path(client: TestClient) -> None:
    # GET and POST /calibrations are separate routes; Starlette alone would say "Allow: POST".
    response = client.request("DELETE", "/api/v1/calibrations")
    assert response.status_code == 405
    assert set(response.headers["allow"].split(", ")) >= {"GET", "POST"}


def test_oversize_body_declared(client: TestClient) -> None:
    body = b'{"model": "' + b"x" * (1 << 20) + b'"}'
    response = client.post(
        "/api/v1/plan", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert response.headers["content-type"] == PROBLEM
    assert "1048576" in response.json()["detail"]


def test_oversize_body_streamed_without_length(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"model": "'
        for _ in range(20):
            yield b"x" * 65536
        yield b'"}'

    # A generator body is sent chunked: no Content-Length to trust, the bytes are counted.
    response = client.post(
        "/api/v1/plan", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert response.headers["content-type"] == PROBLEM


def test_body_just_under_limit_is_parsed(client: TestClient) -> None:
    padding = (1 << 20) - 200
    body = b'{"model": {"num_hidden_layers": 2, "pad": "' + b"x" * padding + b'"}}'
    response = client.post(
        "/api/v1/plan", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code in (200, 422)  # parsed, not refused for size


def test_unknown_path_is_problem(client: TestClient) -> None:
    response = client.get("/api/v1/nope")
    assert response.status_code == 404
    assert response.headers["content-type"] == PROBLEM


def test_sweep_grid_too_large(client: TestClient) -> None:
    body = {
        "base": {"model": MODEL},
        "context_tokens": list(range(1, 33)),
        "batch_sizes": list(range(1, 10)),
    }
    response = client.post("/api/v1/sweep", json=body)
    assert response.status_code == 422
    assert "256" in response.json()["detail"]
    assert response.headers["content-type"] == PROBLEM


def test_sweep_bad_base_field_located(client: TestClient) -> None:
    response = client.post(
        "/api/v1/sweep", json={"base": {"model": MODEL, "engine": 1}, "context_tokens": [8]}
    )
    assert response.status_code == 422
    assert "base.engine" in [e["field"] for e in response.json()["errors"]]


def test_validator_message_without_pydantic_prefix(client: TestClient) -> None:
    # The model validator's own words, without pydantic's "Value error, " in front.
    body = _with(requests=[{"context_tokens": 2048, "count": 3, "prefix_tokens": 4096}])
    r = client.post("/api/v1/plan", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422
    error = r.json()["errors"][0]
    assert error["field"] == "requests[0]"
    assert error["msg"] == "prefix_tokens must not exceed context_tokens"


def test_malformed_json_error_names_the_body_line_and_column(client: TestClient) -> None:
    response = client.post(
        "/api/v1/plan", content=b'{\n  "model": ,\n}', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["loc"] == ["body"] and error["field"] == "body"
    # The parser's own position: line 2, column 12 (the comma where a value should be).
    assert (error["line"], error["column"]) == (2, 12)


def test_config_with_too_many_keys_names_model(client: TestClient) -> None:
    config = {f"k{i}": i for i in range(513)}
    response = client.post("/api/v1/plan", json={"model": config})
    assert response.status_code == 422
    assert [e["field"] for e in response.json()["errors"]] == ["model"]


@pytest.mark.parametrize(
    ("method", "path", "headers", "status"),
    [
        ("GET", "/api/v1/nowhere", {}, 404),
        ("DELETE", "/api/v1/plan", {}, 405),
        ("POST", "/api/v1/plan", {"content-type": "text/plain"}, 415),
        (
            "POST",
            "/api/v1/plan",
            {"content-type": "application/json", "content-length": "9999999"},
            413,
        ),
        ("GET", "/api/v1/calibrations/does-not-exist", {}, 404),
    ],
)
def test_every_4xx_has_errors(
    client: TestClient, method: str, path: str, headers: dict[str, str], status: int
) -> None:
    response = client.request(method, path, headers=headers, content=b"{}")
    assert response.status_code == status
    assert response.headers["content-type"] == PROBLEM
    errors = response.json()["errors"]
    assert errors and all(e["loc"] and e["msg"] for e in errors)


def test_a_planner_error_carries_its_code_and_params(client: TestClient) -> None:
    # Llama-3.1-8B has 32 attention heads, which tensor_parallel_size 3 does not divide.
    response = client.post(
        "/api/v1/plan",
        content=_with(tensor_parallel_size=3),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422
    (item,) = response.json()["errors"]
    assert item["code"] == "engine.tp_divides_heads"
    assert item["params"] == {"label": "vLLM", "hq": 32, "tp": 3, "ok": [1, 2, 4, 8, 16, 32]}
    assert item["msg"] == (
        "vLLM requires num_attention_heads (32) divisible by tensor_parallel_size (3); sizes "
        "that work: [1, 2, 4, 8, 16, 32]"
    )


def test_a_validation_error_has_no_planner_code(client: TestClient) -> None:
    response = client.post(
        "/api/v1/plan",
        content=_with(context_tokens=0),
        headers={"content-type": "application/json"},
    )
    (item,) = response.json()["errors"]
    assert "code" not in item and "params" not in item


def test_a_validator_error_carries_its_code(client: TestClient) -> None:
    # A shared prefix longer than the request itself: the request's own validator refuses it.
    body = {
        **json.loads(_with()),
        "requests": [{"context_tokens": 1024, "count": 2, "prefix_tokens": 2048}],
    }
    response = client.post(
        "/api/v1/plan", content=json.dumps(body), headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    (item,) = response.json()["errors"]
    assert item["code"] == "request.prefix_above_context" and item["params"] == {}
    assert item["msg"] == "prefix_tokens must not exceed context_tokens"
