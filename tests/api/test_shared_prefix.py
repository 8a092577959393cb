"""One prefix shared across a mix (issue 25, item 4), from vLLM's block-pool rules: a full block
is cached under the hash of its tokens (and every token before it), and a request whose prefix
hashes to cached blocks reuses them (`KVCacheManager.get_computed_blocks`; `BlockPool.touch`
raises the block's ref_cnt instead of allocating). Block 0 is the null block
(research/engine_rules.md §BlockPool).

Llama-3.1-8B in bf16 (seed 004): 131,072 B per token, blocks of 16 tokens = 2 MiB. A 1k prefix
is 64 blocks. 40 requests that all start with it hold it once: 39 × 64 blocks saved, whatever
entry of the mix each request is in.
"""

from __future__ import annotations

import json

from starlette.testclient import TestClient
from typer.testing import CliRunner

from planner.cli import app

BLOCK_BYTES = 16 * 131072
PREFIX_BLOCKS = 1024 // 16
MIX = [{"context_tokens": 8192, "count": 10}, {"context_tokens": 2048, "count": 30}]
UNSHARED_BLOCKS = 10 * 512 + 30 * 128


def body(**extra: object) -> dict[str, object]:
    return {"model": "meta-llama/Llama-3.1-8B", "kv_cache_dtype": "bf16", "gpu": "L40S-48GB",
            "requests": MIX, **extra}  # fmt: skip


def test_one_prefix_across_the_mix_is_held_once(client: TestClient) -> None:
    r = client.post("/api/v1/plan", json=body(shared_prefix_tokens=1024))
    assert r.status_code == 200, r.text
    totals = r.json()["totals"]
    assert totals["prefix_shared_bytes_saved"] == 39 * PREFIX_BLOCKS * BLOCK_BYTES
    assert totals["paged_kv_bytes"] == (UNSHARED_BLOCKS - 39 * PREFIX_BLOCKS) * BLOCK_BYTES
    assert [row["prefix_tokens"] for row in r.json()["requests"]] == [1024, 1024]


def test_a_prefix_per_entry_is_held_once_per_entry(client: TestClient) -> None:
    # Entries' own prefix_tokens are prefixes of their own: 9 + 29 reuses.
    per_entry = [{**m, "prefix_tokens": 1024} for m in MIX]
    r = client.post("/api/v1/plan", json={**body(), "requests": per_entry})
    assert r.json()["totals"]["prefix_shared_bytes_saved"] == 38 * PREFIX_BLOCKS * BLOCK_BYTES


def test_the_null_block_note_quotes_the_figure_it_explains(client: TestClient) -> None:
    # 48 GiB = 24,576 blocks: vLLM logs 24,576 / 512 = 48.00x and admits (24,576 − 1) // 512 =
    # 47 requests of 8,192 tokens alone; sharing the 64-block prefix, 1 + (24,575 − 512) // 448
    # = 54. The null-block note explains 47; 54 is the prefix note's.
    plan = client.post(
        "/api/v1/plan", json={**body(shared_prefix_tokens=1024), "gpu": None,
                              "kv_budget_bytes": 48 << 30, "context_tokens": 8192},
    ).json()  # fmt: skip
    notes = {n["code"]: n["params"] for n in plan["notes_detail"]}
    assert notes["capacity.null_block"]["fit"] == 47
    assert notes["capacity.null_block"]["reported"] == 48.0
    assert (notes["capacity.prefix_shared"]["fit"], notes["capacity.prefix_shared"]["alone"]) == (
        54,
        47,
    )
    assert plan["capacity"]["max_requests"] == 54


def test_the_prefix_must_fit_the_shortest_request(client: TestClient) -> None:
    r = client.post("/api/v1/plan", json=body(shared_prefix_tokens=4096))
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "shared_prefix_tokens"
    own = [{**MIX[0], "prefix_tokens": 512}]
    both = client.post("/api/v1/plan", json={**body(shared_prefix_tokens=512), "requests": own})
    assert both.status_code == 422


def test_cli_prefix_is_one_prefix_for_the_whole_mix(client: TestClient) -> None:
    r = CliRunner().invoke(app, ["plan", "--model", "meta-llama/Llama-3.1-8B", "--dtype", "bf16",
                                 "--gpu", "L40S-48GB", "--mix", "8192x10,2048x30", "--prefix",
                                 "1k", "--json"])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    cli = json.loads(r.stdout)
    api = client.post("/api/v1/plan", json=body(shared_prefix_tokens=1024)).json()
    assert cli["totals"] == api["totals"]
    assert cli["totals"]["prefix_shared_bytes_saved"] == 39 * PREFIX_BLOCKS * BLOCK_BYTES
