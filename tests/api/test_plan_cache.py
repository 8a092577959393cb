"""The plan memo: identical bodies, identical bytes; bounded; calibrated plans never cached."""

from __future__ import annotations

from starlette.testclient import TestClient

from planner.api.plan_cache import PlanCache
from tests.api.conftest import QUESTION_48_GIB


def test_repeat_answers_are_byte_identical_and_hit(client: TestClient) -> None:
    first = client.post("/api/v1/plan", json=QUESTION_48_GIB)
    second = client.post("/api/v1/plan", json=QUESTION_48_GIB)
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    assert second.json()["capacity"]["max_requests"] == 47
    cache = client.app.state.plan_cache  # type: ignore[attr-defined]
    assert cache.hits >= 1


def test_errors_are_not_cached(client: TestClient) -> None:
    bad = {**QUESTION_48_GIB, "tensor_parallel_size": 3}
    assert client.post("/api/v1/plan", json=bad).status_code == 422
    assert client.post("/api/v1/plan", json=bad).status_code == 422
    assert len(client.app.state.plan_cache) == 0  # type: ignore[attr-defined]


def test_lru_is_bounded() -> None:
    cache = PlanCache(max_entries=2)
    for key in (b"a", b"b", b"c"):
        cache.put(key, key.upper())
    assert len(cache) == 2 and cache.get(b"a") is None and cache.get(b"c") == b"C"
