"""`POST /api/v1/recommend`: settings whose plan (via `POST /api/v1/plan`) holds the workload;
an impossible target is a 200 naming what binds; bad bodies are 4xx problems."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

MIX = [
    {"context_tokens": 2048, "share": 0.7},
    {"context_tokens": 8192, "share": 0.2},
    {"context_tokens": 32768, "share": 0.1},
]
BODY = {
    "model": "meta-llama/Llama-3.1-70B",
    "gpu": "H100-SXM-80GB",
    "gpu_count": 4,
    "context_mix": MIX,
    "concurrency": 48,
    "tpot_seconds": 0.05,
}


def test_recommendation_plans_back_through_the_api(client: TestClient) -> None:
    response = client.post("/api/v1/recommend", json=BODY)
    assert response.status_code == 200, response.text
    r = response.json()
    assert r["feasible"] is True
    settings = r["settings"]
    assert set(settings) >= {
        "tensor_parallel_size",
        "max_model_len",
        "max_num_seqs",
        "gpu_memory_utilization",
        "kv_cache_dtype",
        "block_size",
    }
    assert r["command"].startswith("vllm serve meta-llama/Llama-3.1-70B --tensor-parallel-size ")
    planned = client.post("/api/v1/plan", json=r["plan_request"])
    assert planned.status_code == 200, planned.text
    p = planned.json()
    assert p["capacity"]["workload_fits"] is True
    assert p["tensor_parallel_size"] == settings["tensor_parallel_size"]
    assert p["bounds"]["decode_step_seconds"] <= BODY["tpot_seconds"]


def test_impossible_target_names_the_binding_constraint(client: TestClient) -> None:
    response = client.post("/api/v1/recommend", json={**BODY, "gpu_count": 1, "concurrency": 64})
    assert response.status_code == 200
    r = response.json()
    assert r["feasible"] is False and r["settings"] is None and r["command"] is None
    assert r["binding_constraint"] == "weights_exceed_memory"
    assert any(s["change"].startswith("gpu_count ") for s in r["nearest"])


@pytest.mark.parametrize(
    ("patch", "status", "field"),
    [
        ({"concurrency": 0}, 422, "concurrency"),
        ({"gpu_count": 0}, 422, "gpu_count"),
        ({"engine": "transformers"}, 422, "engine"),
        ({"gpu": "no-such-gpu"}, 422, "gpu"),
        ({"model": "no/such-model"}, 422, "model"),
        ({"tpot_seconds": -1}, 422, "tpot_seconds"),
        ({"context_mix": [{"context_tokens": 1024, "share": 0.5}]}, 422, None),
        ({"context_mix": None}, 422, None),
        ({"kv_cache_dtype": "int3"}, 422, "kv_cache_dtype"),
        ({"extra": 1}, 422, "extra"),
    ],
)
def test_bad_bodies(
    client: TestClient, patch: dict[str, object], status: int, field: str | None
) -> None:
    response = client.post("/api/v1/recommend", json={**BODY, **patch})
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["detail"]
    if field is not None:
        assert field in [e["field"] for e in problem["errors"]]
