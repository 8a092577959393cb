"""A KV budget given beside a GPU (issue 25, item 1): one rule in the core, the same answer from
the API, the CLI and the page (tests/web/test_budget_browser.py).

What the engine does: vLLM's `Worker.determine_available_memory` returns
`cache_config.kv_cache_memory_bytes` as given and skips the memory profile (its log: "skipped
memory profiling. This does not respect the gpu_memory_utilization config"), and the KV tensors
are allocated after the weights load. So the weights count: Llama-3.1-8B's weights take
14.9888 GiB on one GPU ("Loading weights took 14.9888 GB", research engine log; vLLM's "GB" is
2^30), which with 40 GiB of KV is more than any 48 GB board holds. A budget above the GPU's
whole memory cannot be allocated by any engine and is refused, naming the field.
"""

from __future__ import annotations

import json

from starlette.testclient import TestClient
from typer.testing import CliRunner

from planner.catalog import get_gpu
from planner.cli import app

GiB = 1 << 30
LLAMA = "meta-llama/Llama-3.1-8B"
LOGGED_WEIGHTS_BYTES = int(14.9888 * GiB)  # vLLM's log for Llama-3.1-8B in bf16, one GPU
L40S = get_gpu("L40S-48GB").usable_memory_bytes
runner = CliRunner()


def body(budget_gib: int) -> dict[str, object]:
    return {"model": LLAMA, "context_tokens": 8192, "gpu": "L40S-48GB",
            "kv_budget_bytes": budget_gib * GiB}  # fmt: skip


def test_weights_plus_budget_over_the_gpu_does_not_start(client: TestClient) -> None:
    assert LOGGED_WEIGHTS_BYTES + 40 * GiB > L40S  # the premise, from the log
    r = client.post("/api/v1/plan", json=body(40))
    assert r.status_code == 200
    cap = r.json()["capacity"]
    assert cap["engine_starts"] is False and cap["max_requests"] == 0
    assert "out of memory allocating the KV cache" in cap["start_error"]
    weights = cap["budget"]["weights_bytes_per_rank"]
    assert abs(weights - LOGGED_WEIGHTS_BYTES) < GiB // 10  # the weights counted are the log's
    # The pool itself is the budget's: 40 GiB / 2 MiB blocks (vLLM's page for this shape).
    assert cap["num_blocks"] == 40 * GiB // (16 * 131072)


def test_weights_plus_budget_within_the_gpu_starts_and_says_what_is_left(
    client: TestClient,
) -> None:
    r = client.post("/api/v1/plan", json=body(20))
    cap = r.json()["capacity"]
    assert cap["engine_starts"] is True
    assert cap["max_requests"] == (20 * GiB // (2 << 20) - 1) // 512  # 19: null block held back
    codes = [n["code"] for n in r.json()["notes_detail"]]
    assert "budget.explicit_with_gpu" in codes


def test_a_budget_above_the_gpu_is_refused_naming_the_field(client: TestClient) -> None:
    assert 48 * GiB > L40S
    r = client.post("/api/v1/plan", json=body(48))
    assert r.status_code == 422
    problem = r.json()
    assert [e["field"] for e in problem["errors"]] == ["kv_budget_bytes"]
    assert "no engine can allocate it" in problem["errors"][0]["msg"]


def test_without_a_gpu_the_budget_is_taken_as_given(client: TestClient) -> None:
    r = client.post("/api/v1/plan", json={**body(40), "gpu": None})
    cap = r.json()["capacity"]
    assert cap["engine_starts"] is True and cap["budget"]["weights_bytes_per_rank"] is None


def cli(*flags: str) -> tuple[int, str, str]:
    r = runner.invoke(app, ["plan", "--model", LLAMA, "--context", "8k", "--gpu", "L40S-48GB",
                            *flags])  # fmt: skip
    return r.exit_code, r.stdout, r.stderr


def test_cli_says_the_same_as_the_api(client: TestClient) -> None:
    _, out, _ = cli("--budget", "40GiB", "--json")
    api = client.post("/api/v1/plan", json=body(40)).json()
    assert json.loads(out)["capacity"] == api["capacity"]
    _, human, _ = cli("--budget", "40GiB")
    assert "will it start    NO: out of memory allocating the KV cache" in human
    assert "+ weights 14.958 GiB per GPU = 54.958 GiB" in human


def test_cli_refuses_a_budget_above_the_gpu_naming_the_flag() -> None:
    code, _, err = cli("--budget", "48GiB")
    assert code == 2
    assert err.startswith("kvplan plan: --budget: 48.000 GiB is more than the L40S-48GB has")
