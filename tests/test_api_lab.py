"""`/api/v1/lab/*`: the seed's mask grid and ring slots, counts equal to the closed forms, 422s."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from planner.api.lab import router
from planner.api.problems import install_problem_handlers


@pytest.fixture(scope="module")
def client() -> TestClient:
    app = FastAPI()
    install_problem_handlers(app)
    app.include_router(router, prefix="/api/v1")
    return TestClient(app)


def test_mask_seed_p3_t2(client: TestClient) -> None:
    r = client.get("/api/v1/lab/mask", params={"cached_tokens": 3, "chunk_tokens": 2})
    assert r.status_code == 200
    body = r.json()
    assert body["key_tokens"] == 5  # a 2×5 mask, not 2×2
    q3, q4 = body["rows"]
    assert q3["query_position"] == 3
    assert q3["visible_wrong"] == [0]  # seed 000: top-left, Q3 sees only K0
    assert q3["visible_correct"] == [0, 1, 2, 3]
    assert q4["visible_correct"] == [0, 1, 2, 3, 4]
    assert body["correct"][0] == [True, True, True, True, False]
    assert body["wrong"][0] == [True, False, False, False, False]
    assert body["first_wrong_position"] == 3


def test_mask_without_cache_is_the_same_both_ways(client: TestClient) -> None:
    body = client.get("/api/v1/lab/mask", params={"cached_tokens": 0, "chunk_tokens": 3}).json()
    assert body["correct"] == body["wrong"]
    assert body["first_wrong_position"] is None


def test_ring_seed_five_tokens_capacity_four(client: TestClient) -> None:
    body = client.get("/api/v1/lab/ring", params={"tokens": 6, "capacity": 4}).json()
    new = body["steps"][5]
    assert (new["position"], new["slot"], new["cache_tokens"]) == (5, 1, 4)
    assert new["window_start"] == 2
    assert body["steps"][0]["slots"] == [0, None, None, None]


def test_counts_equal_closed_forms(client: TestClient) -> None:
    d, lengths = 6, [1, 5, 17, 64]
    r = client.get("/api/v1/lab/counts", params={"d": d, "lengths": lengths})
    assert r.status_code == 200
    rows = r.json()["rows"]
    assert [row["context_tokens"] for row in rows] == lengths
    for row in rows:
        n = row["context_tokens"]
        assert row["no_cache_projection"] == 3 * n * d * d
        assert row["cache_projection"] == 3 * d * d
        assert row["no_cache_attention"] == row["cache_attention"] == 2 * n * d
        assert row["matches_closed_form"] and row["outputs_match"]


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("mask", {"cached_tokens": 65}, "cached_tokens"),
        ("mask", {"chunk_tokens": 0}, "chunk_tokens"),
        ("mask", {"cached_tokens": "three"}, "cached_tokens"),
        ("ring", {"tokens": 257}, "tokens"),
        ("ring", {"capacity": 0}, "capacity"),
        ("counts", {"d": 17}, "d"),
        ("counts", {"lengths": [0]}, "lengths[0]"),
        ("counts", {"lengths": list(range(1, 14))}, "lengths"),
    ],
)
def test_out_of_bounds_is_a_422_problem(
    client: TestClient, path: str, params: dict[str, object], field: str
) -> None:
    r = client.get(f"/api/v1/lab/{path}", params=params)
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("application/problem+json")
    errors = r.json()["errors"]
    assert errors[0]["loc"][0] == "query"
    assert errors[0]["field"] == f"query.{field}"


def test_openapi_documents_the_bounds(client: TestClient) -> None:
    spec = client.app.openapi()  # type: ignore[attr-defined]
    params = {p["name"]: p for p in spec["paths"]["/api/v1/lab/mask"]["get"]["parameters"]}
    assert params["cached_tokens"]["schema"]["maximum"] == 64
    assert "422" in spec["paths"]["/api/v1/lab/counts"]["get"]["responses"]
