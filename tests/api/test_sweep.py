"""`POST /api/v1/sweep`: every point agrees with a single `/plan` call; bad points are located."""

from __future__ import annotations

from starlette.testclient import TestClient

MODEL = "meta-llama/Llama-3.1-8B"


def test_sweep_points_equal_single_plans(client: TestClient) -> None:
    base = {"model": MODEL, "kv_cache_dtype": "bf16", "kv_budget_bytes": 48 << 30}
    body = {
        "base": base,
        "context_tokens": [2048, 8192],
        "batch_sizes": [1, 4],
        "tensor_parallel_sizes": [1, 2],
    }
    response = client.post("/api/v1/sweep", json=body)
    assert response.status_code == 200
    result = response.json()
    assert result["failed_points"] == 0
    points = result["points"]
    assert [(p["context_tokens"], p["batch_size"], p["tensor_parallel_size"]) for p in points] == [
        (c, b, t) for c in (2048, 8192) for b in (1, 4) for t in (1, 2)
    ]
    for point in points:
        single = client.post(
            "/api/v1/plan",
            json={
                **base,
                "context_tokens": point["context_tokens"],
                "requests": [
                    {"context_tokens": point["context_tokens"], "count": point["batch_size"]}
                ],
                "tensor_parallel_size": point["tensor_parallel_size"],
            },
        ).json()
        assert point["max_requests"] == single["capacity"]["max_requests"]
        assert point["paged_kv_bytes"] == single["totals"]["paged_kv_bytes"]
        assert point["plan"] is None
    # 8k context, TP=1, 48 GiB: the 48 GiB question's 47 requests.
    assert points[4]["max_requests"] == 47


def test_sweep_reports_bad_points_and_keeps_good_ones(client: TestClient) -> None:
    body = {
        "base": {"model": MODEL},
        "context_tokens": [1024],
        "tensor_parallel_sizes": [2, 3],
        "include_plans": True,
    }
    points = client.post("/api/v1/sweep", json=body).json()["points"]
    assert points[0]["error"] is None and points[0]["plan"]["tensor_parallel_size"] == 2
    # The offending TP size came from the sweep's axis, so the error names the axis.
    assert points[1]["error"]["errors"][0]["field"] == "tensor_parallel_sizes"


def test_sweep_all_points_failing_is_422(client: TestClient) -> None:
    response = client.post(
        "/api/v1/sweep", json={"base": {"model": "no/such"}, "context_tokens": [8, 16]}
    )
    assert response.status_code == 422
    # Located in the sweep request: the model is `base.model` (as validation errors say).
    assert response.json()["errors"][0]["field"] == "base.model"
