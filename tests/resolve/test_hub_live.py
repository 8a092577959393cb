"""`kvplan serve` under a Hub that drips, stalls, rate-limits, is far away or does not answer
(issue 23, item 1): `/healthz` p99 stays under 0.5 s and catalog plans are unaffected while
clients keep asking for Hub ids.

A real server process (tests/live_server.py) with its worker pool, pointed at the loopback Hub
(or at an address whose SYNs are dropped). Attackers post plans for Hub ids from 4 threads; a
prober asks `/healthz` every 10 ms and plans a catalog question every 100 ms meanwhile.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.live_server import LiveServer
from tests.resolve.hub_server import HubState, black_hole, hub_server

ATTACK_SECONDS = 4.0
ATTACKERS = 4
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
            stop.wait(0.05)  # clients, not a CPU flood (bench/load.sh measures floods)


def _probe(base: str, seconds: float) -> tuple[list[float], list[float]]:
    """/healthz every 10 ms and a catalog plan every 100 ms for `seconds`: their latencies."""
    health: list[float] = []
    plans: list[float] = []
    with httpx.Client(base_url=base, timeout=30.0) as probe:
        end = time.monotonic() + seconds
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
            time.sleep(0.01)
    return health, plans


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
            # The machine's own noise (a shared CI box): /healthz with no attack, first.
            baseline, baseline_plans = _probe(live.url, 1.5)
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
            health, plans = _probe(live.url, ATTACK_SECONDS)
            stop.set()
            for t in threads:
                t.join(HUB_TIMEOUT_S + 30)
            log = live.log()
    print(
        f"{mode}: /healthz p99 {_p99(baseline) * 1000:.1f} ms alone, "
        f"{_p99(health) * 1000:.1f} ms under attack (n={len(health)}); catalog plan p99 "
        f"{_p99(baseline_plans) * 1000:.1f} ms alone, {_p99(plans) * 1000:.1f} ms under attack "
        f"(n={len(plans)}); {len(statuses)} attack answers {sorted(set(statuses))}"
    )
    # A loop held by the Hub answers in seconds (29.8 s measured before); a free one within
    # the target, plus what this machine adds with no attack at all.
    limit = HEALTHZ_P99_S + _p99(baseline)
    assert _p99(health) < limit, (mode, _p99(health), max(health), _p99(baseline))
    plan_limit = HEALTHZ_P99_S + _p99(baseline_plans)
    assert _p99(plans) < plan_limit, (mode, _p99(plans), max(plans), _p99(baseline_plans))
    assert statuses, "no attack request was answered"
    assert all(s in (422, 503) for s in statuses), (sorted(set(statuses)), log)


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _tree_rss_mib(pid: int) -> float:
    """The server and its worker processes (its children)."""
    total = _rss_mib(pid)
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        total += _rss_mib(int(child))
    return total


def test_memory_stays_bounded_under_typed_variants_and_wide_configs(tmp_path: Path) -> None:
    """Issue 23, item 3: one repo with a 2.7 MB config.json asked under typed variants costs one
    cache entry; many such repos cost at most KVPLAN_HUB_MEMORY_CACHE_BYTES."""
    from tests.resolve.conftest import SHARDED_CONFIG
    from tests.resolve.hub_server import Repo

    wide = {**SHARDED_CONFIG, "id2label": {str(i): f"label-{i:08d}" for i in range(120_000)}}
    raw = json.dumps(wide).encode()
    assert len(raw) > 2_500_000
    state = HubState()
    repos = 24  # 24 × 2.7 MB configs, and more held as parsed dicts: far past the two caps
    for i in range(repos):
        state.add(f"Wide/m{i}", Repo({"config.json": raw}))
    cap = 16 << 20
    with hub_server(state) as hub_url:
        env = {
            "KVPLAN_HUB_ENABLED": "true",
            "HF_ENDPOINT": hub_url,
            "HF_HOME": str(tmp_path / "hf"),
            "KVPLAN_HUB_MEMORY_CACHE_BYTES": str(cap),
            "KVPLAN_HUB_CACHE_BYTES": str(64 << 20),
            "KVPLAN_DATA_DIR": str(tmp_path / "data"),
            "KVPLAN_WORKERS": "1",
        }
        with (
            LiveServer(env, tmp_path / "server.log") as live,
            httpx.Client(base_url=live.url, timeout=60) as client,
        ):
            body = {"kv_budget_bytes": 1 << 30}
            variants = ["Wide/m0", "wide/M0", "WIDE/m0", "hf://Wide/m0"]
            variants += [f"https://huggingface.co/Wide/m0/tree/main/{n}" for n in range(40)]
            for typed in variants[:20]:  # the allocators settle (pickled configs come and go)
                assert client.post("/api/v1/plan", json={**body, "model": typed}).status_code == 200
            before = _tree_rss_mib(live.proc.pid)
            for typed in variants[20:]:
                assert client.post("/api/v1/plan", json={**body, "model": typed}).status_code == 200
            after_variants = _tree_rss_mib(live.proc.pid)
            for i in range(1, repos):
                r = client.post("/api/v1/plan", json={**body, "model": f"Wide/m{i}"})
                assert r.status_code == 200, r.text
            after_repos = _tree_rss_mib(live.proc.pid)
            infos = [q for q in state.requests if q.path == "/api/models/Wide/m0"]
    print(
        f"RSS server+worker: {before:.0f} MiB after 20 typed variants of one repo; "
        f"{after_variants:.0f} MiB after {len(variants) - 20} more; {after_repos:.0f} MiB after "
        f"{repos - 1} more repos ({len(raw) / 1e6:.1f} MB config each, "
        f"cap {cap >> 20} MiB per cache)"
    )
    assert len(infos) == 1  # the variants were one lookup
    # The issue measured +3.66 MiB per variant before: 24 more would have been +88 MiB.
    assert after_variants - before < 16, (before, after_variants)
    # Two caches (the server's resolved configs, the worker's built models), each capped.
    assert after_repos - before < 2 * (cap >> 20) + 60, (before, after_repos)
