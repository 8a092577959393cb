"""`kvplan serve` under a Hub that drips, stalls, rate-limits, is far away or does not answer
(issue 23, item 1): `/healthz` p99 stays under 0.5 s and catalog plans are unaffected while
clients keep asking for Hub ids.

A real server process (tests/live_server.py) with its worker pool, pointed at the loopback Hub
(or at an address whose SYNs are dropped). Attackers post plans for Hub ids from 8 threads; a
prober asks `/healthz` every 20 ms and plans a catalog question every 100 ms meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.live_server import LiveServer
from tests.resolve.hub_server import HubState, black_hole, hub_server

ATTACK_SECONDS = 3.0
ATTACKERS = 8
HUB_TIMEOUT_S = 2.0
HEALTHZ_P99_S = 0.5
CATALOG_QUESTION = {
    "model": "meta-llama/Llama-3.1-8B",
    "kv_cache_dtype": "bf16",
    "context_tokens": 8192,
    "kv_budget_bytes": 51539607552,
}


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


@contextmanager
def _endpoint(mode: str) -> Iterator[str]:
    if mode == "black_hole":
        with black_hole() as url:
            yield url
        return
    state = HubState()
    state.mode = mode
    with hub_server(state) as url:
        yield url


def _attack(base: str, ids: list[str], statuses: list[int], stop: threading.Event) -> None:
    with httpx.Client(base_url=base, timeout=30.0) as client:
        i = 0
        while not stop.is_set():
            r = client.post("/api/v1/plan", json={"model": ids[i % len(ids)]})
            statuses.append(r.status_code)
            i += 1


@pytest.mark.parametrize("mode", ["drip", "stall", "black_hole", "429", "slow"])
def test_healthz_and_catalog_plans_hold_while_the_hub_misbehaves(tmp_path: Path, mode: str) -> None:
    with _endpoint(mode) as hub_url:
        env = {
            "KVPLAN_HUB_ENABLED": "true",
            "HF_ENDPOINT": hub_url,
            "HF_HOME": str(tmp_path / "hf"),
            "HF_HUB_OFFLINE": "0",
            "KVPLAN_HUB_TIMEOUT_SECONDS": str(HUB_TIMEOUT_S),
            "KVPLAN_DATA_DIR": str(tmp_path / "data"),
            "KVPLAN_WORKERS": "1",
        }
        with LiveServer(env, tmp_path / "server.log") as live:
            stop = threading.Event()
            statuses: list[int] = []
            # Distinct mistyped ids per attacker (a far-away Hub: a few, asked again and again).
            threads = [
                threading.Thread(
                    target=_attack,
                    args=(
                        live.url,
                        [f"acme/typo-{n}-{k}" for k in range(2 if mode == "slow" else 50)],
                        statuses,
                        stop,
                    ),
                    daemon=True,
                )
                for n in range(ATTACKERS)
            ]
            for t in threads:
                t.start()
            health: list[float] = []
            plans: list[float] = []
            with httpx.Client(base_url=live.url, timeout=30.0) as probe:
                end = time.monotonic() + ATTACK_SECONDS
                next_plan = 0.0
                while time.monotonic() < end:
                    t0 = time.monotonic()
                    assert probe.get("/healthz").status_code == 200
                    health.append(time.monotonic() - t0)
                    if t0 >= next_plan:
                        t1 = time.monotonic()
                        assert probe.post("/api/v1/plan", json=CATALOG_QUESTION).status_code == 200
                        plans.append(time.monotonic() - t1)
                        next_plan = t1 + 0.1
                    time.sleep(0.02)
            stop.set()
            for t in threads:
                t.join(HUB_TIMEOUT_S + 30)
            log = live.log()
    print(
        f"{mode}: healthz n={len(health)} p99={_p99(health) * 1000:.1f} ms; catalog plan "
        f"n={len(plans)} p99={_p99(plans) * 1000:.1f} ms; attack answers {len(statuses)} "
        f"{sorted(set(statuses))}"
    )
    assert _p99(health) < HEALTHZ_P99_S, (mode, _p99(health), max(health))
    assert _p99(plans) < HEALTHZ_P99_S, (mode, _p99(plans), max(plans))
    assert statuses, "no attack request was answered"
    assert all(s in (422, 503) for s in statuses), (sorted(set(statuses)), log)
