"""The service's side of a Hub lookup (issue 23): off the event loop, one fetch per id, the cost
read from the resolved model, and a 4xx naming the field for whatever the Hub answers.

`HubLookups` and the app run against the loopback Hub of tests/resolve/hub_server.py.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from planner.api.hub import HubLookups
from planner.app import create_app
from planner.resolve import HubUnavailableError
from planner.settings import Settings
from tests.resolve.conftest import settings as hub_settings
from tests.resolve.hub_server import HubState, Repo

Hub = tuple[str, HubState]

CATALOG_QUESTION = {
    "model": "meta-llama/Llama-3.1-8B",
    "kv_cache_dtype": "bf16",
    "context_tokens": 8192,
    "kv_budget_bytes": 51539607552,
}


def _deep(layers: int) -> bytes:
    return json.dumps(
        {
            "model_type": "llama",
            "architectures": ["LlamaForCausalLM"],
            "num_hidden_layers": layers,
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "intermediate_size": 14336,
            "vocab_size": 128256,
            "max_position_embeddings": 1 << 24,
            "torch_dtype": "bfloat16",
        }
    ).encode()


async def _max_loop_lag(seconds: float) -> float:
    """The longest the loop was late for a 10 ms sleep over `seconds`."""
    worst = 0.0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.monotonic()
        await asyncio.sleep(0.01)
        worst = max(worst, time.monotonic() - start - 0.01)
    return worst


async def test_one_fetch_per_id_however_many_ask_and_however_typed(
    hub: Hub, tmp_path: Path
) -> None:
    url, state = hub
    state.mode = "slow"
    lookups = HubLookups(hub_settings(url, tmp_path))
    typed = ["acme/sharded-llama", "ACME/sharded-llama", "hf://acme/sharded-llama"] * 5
    found = await asyncio.gather(*(lookups.resolve(t, None) for t in typed))
    assert {r.id for r in found if r is not None} == {"acme/sharded-llama"}
    assert lookups.fetches == 1
    assert len([q for q in state.requests if q.path.startswith("/api/models/")]) == 1


@pytest.mark.parametrize("mode", ["drip", "stall", "429"])
async def test_a_hostile_hub_never_holds_the_loop(hub: Hub, tmp_path: Path, mode: str) -> None:
    url, state = hub
    state.mode = mode
    lookups = HubLookups(hub_settings(url, tmp_path, timeout_seconds=1.0))
    # The same loop's lateness with nothing to do: what a loaded machine adds on its own (the
    # suite runs on several workers), so the bound below is on what the lookup adds.
    idle_lag = await _max_loop_lag(0.25)
    started = time.monotonic()
    lookup = asyncio.ensure_future(lookups.resolve("acme/sharded-llama", None))
    lag = await _max_loop_lag(0.5)
    with pytest.raises(HubUnavailableError):
        await lookup
    assert time.monotonic() - started < 2.5
    assert lag < idle_lag + 0.1, (lag, idle_lag)


@pytest.fixture
def client(hub: Hub, tmp_path: Path) -> Iterator[TestClient]:
    url, _ = hub
    app = create_app(
        Settings(data_dir=tmp_path / "data"),
        hub_settings=hub_settings(url, tmp_path / "hf", timeout_seconds=2.0),
    )
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def test_cost_is_read_from_the_resolved_model(hub: Hub, client: TestClient) -> None:
    """Issue 23, item 2: a 4096-layer Hub model with TensorRT-LLM, 4096 windows and 256 entries
    is refused as the same body with the config pasted is, before any plan runs."""
    _, state = hub
    state.add("deep/m4096", Repo({"config.json": _deep(4096)}))
    body = {
        "model": "deep/m4096",
        "engine": "trtllm",
        "kv_budget_bytes": 51539607552,
        "max_attention_window": list(range(1, 4097)),
        "requests": [{"context_tokens": 1024 + i, "count": 1} for i in range(256)],
    }
    hub_answer = client.post("/api/v1/plan", json=body)
    pasted = client.post("/api/v1/plan", json={**body, "model": json.loads(_deep(4096))})
    assert pasted.status_code == 422 and "KVPLAN_MAX_REQUEST_COST" in pasted.json()["detail"]
    assert hub_answer.status_code == 422, hub_answer.text
    assert hub_answer.json()["type"] == pasted.json()["type"]
    assert "KVPLAN_MAX_REQUEST_COST" in hub_answer.json()["detail"]


def test_a_hub_model_plans_in_a_worker_with_what_the_server_resolved(
    hub: Hub, client: TestClient
) -> None:
    _, state = hub
    answer = client.post(
        "/api/v1/plan", json={"model": "acme/sharded-llama", "kv_budget_bytes": 1 << 30}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["model"]["id"] == "acme/sharded-llama"
    infos = [q for q in state.requests if q.path.startswith("/api/models/")]
    assert len(infos) == 1  # the worker planned with the server's lookup, not its own


@pytest.mark.parametrize(
    "mode", ["not_json", "wrong_types", "bad_sha", "bad_etag", "huge", "429", "redirect"]
)
def test_whatever_the_hub_answers_is_a_4xx_naming_model(
    hub: Hub, client: TestClient, mode: str
) -> None:
    _, state = hub
    state.mode = mode
    state.redirect_to = "http://127.0.0.1:9"
    answer = client.post("/api/v1/plan", json={"model": "acme/sharded-llama"})
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert problem["errors"][0]["loc"] == ["model"]


@pytest.mark.parametrize("revision", ["main/../../../../tmp/x", "main\n"])
def test_revision_paths_are_a_4xx_naming_revision(
    hub: Hub, client: TestClient, revision: str
) -> None:
    _, state = hub
    answer = client.post("/api/v1/plan", json={"model": "acme/sharded-llama", "revision": revision})
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["loc"] == ["revision"]
    assert state.requests == []


def test_a_sweep_names_base_model(hub: Hub, client: TestClient) -> None:
    _, state = hub
    state.mode = "not_json"
    body = {"base": {"model": "acme/sharded-llama"}, "context_tokens": [1024], "batch_sizes": [1]}
    answer = client.post("/api/v1/sweep", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["loc"] == ["base", "model"]


def test_catalog_plans_never_ask_the_hub(hub: Hub, client: TestClient) -> None:
    _, state = hub
    state.mode = "stall"
    started = time.monotonic()
    assert client.post("/api/v1/plan", json=CATALOG_QUESTION).status_code == 200
    assert time.monotonic() - started < 1.0
    assert state.requests == []


def test_recommend_prices_and_plans_a_hub_model_resolved_once(hub: Hub, client: TestClient) -> None:
    _, state = hub
    body = {
        "model": "acme/sharded-llama",
        "gpu": "H100-SXM-80GB",
        "gpu_count": 8,
        "context_mix": [{"context_tokens": 256 * (i + 1), "share": 1 / 16} for i in range(16)],
        "concurrency": 8,
    }
    answer = client.post("/api/v1/recommend", json=body)
    assert answer.status_code == 200, answer.text
    infos = [q for q in state.requests if q.path.startswith("/api/models/")]
    assert len(infos) == 1  # the worker searched with the server's lookup
