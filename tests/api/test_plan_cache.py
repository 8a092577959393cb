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


def test_memo_is_bounded_in_bytes() -> None:
    """1,100 distinct bodies with 703 KB answers (the issue's measurement: +727 MiB that
    stayed): the memo holds at most its byte bound, and never one answer over 1/8 of it."""
    from planner.api.plan_cache import PlanCache

    cache = PlanCache(max_bytes=8 << 20)
    answer = b"x" * 703_000
    for i in range(1100):
        cache.put(b'{"n": %d}' % i, answer)
    assert cache.bytes <= 8 << 20
    assert 0 < len(cache) <= (8 << 20) // 703_000
    assert cache.get(b'{"n": 1099}') == answer  # the newest are kept
    cache.put(b'{"big": 1}', b"y" * (2 << 20))  # over 1/8 of the bound: not kept
    assert cache.get(b'{"big": 1}') is None
