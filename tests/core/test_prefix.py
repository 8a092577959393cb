"""Prefix sharing: requests that share a prompt prefix are charged it once where the engine
caches prefixes, and the answer says so (issue 2). vLLM and TensorRT-LLM reuse whole blocks only
(vLLM's automatic prefix caching hashes full blocks); SGLang's radix cache shares tokens;
transformers has no cross-request cache."""

from __future__ import annotations

from tests.core.conftest import SEED_CONFIG, run

PER_TOKEN = 131072  # seed: 128 KiB per token for L=32, Hkv=8, d=128, bf16
MIX = [{"context_tokens": 8192, "count": 10, "prefix_tokens": 1000}]


def test_vllm_shares_whole_blocks_of_the_prefix() -> None:
    p = run(model=SEED_CONFIG, requests=MIX)
    shared = 1000 // 16 * 16  # 992 tokens in 62 full blocks
    assert p.totals.prefix_shared_bytes_saved == 9 * shared * PER_TOKEN
    assert p.totals.kv_bytes == 10 * 8192 * PER_TOKEN - 9 * shared * PER_TOKEN
    assert any("whole blocks" in n for n in p.notes)


def test_sglang_shares_every_prefix_token() -> None:
    p = run(model=SEED_CONFIG, engine="sglang", requests=MIX)
    assert p.totals.prefix_shared_bytes_saved == 9 * 1000 * PER_TOKEN


def test_transformers_and_disabled_caching_share_nothing() -> None:
    t = run(model=SEED_CONFIG, engine="transformers", requests=MIX)
    off = run(model=SEED_CONFIG, requests=MIX, enable_prefix_caching=False)
    for p in (t, off):
        assert p.totals.prefix_shared_bytes_saved == 0
        assert p.totals.kv_bytes == 10 * 8192 * PER_TOKEN
    assert any("no cross-request prefix cache" in n for n in t.notes)
    assert any("Prefix caching is off" in n for n in off.notes)


def test_prefix_longer_than_context_is_rejected() -> None:
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="prefix_tokens"):
        run(model=SEED_CONFIG, requests=[{"context_tokens": 10, "prefix_tokens": 11}])


def test_shared_prefix_blocks_count_once_for_admission() -> None:
    # 2 requests of 1,024 tokens need 2 × 64 blocks; sharing a 512-token prefix saves 32 blocks.
    page_blocks = 64 + 64 - 32
    budget = (page_blocks + 1) * 16 * 32 * 8 * 128 * 2 * 2  # + the null block
    shared = run(
        model=SEED_CONFIG,
        kv_budget_bytes=budget,
        requests=[{"context_tokens": 1024, "count": 2, "prefix_tokens": 512}],
    )
    alone = run(
        model=SEED_CONFIG, kv_budget_bytes=budget, requests=[{"context_tokens": 1024, "count": 2}]
    )
    assert shared.capacity is not None and alone.capacity is not None
    assert shared.capacity.workload_fits is True
    assert alone.capacity.workload_fits is False


def test_max_requests_counts_a_shared_prefix_once() -> None:
    # Llama-3.1-8B, 48 GiB: 24,576 blocks, 24,575 usable (null block); a request of 8,192
    # tokens needs 512 blocks, 256 of them the shared 4,096-token prefix (vLLM's prefix cache
    # shares whole blocks). The first request holds 512, each further one 256:
    # 1 + (24,575 − 512) // 256 = 94 fit, against 47 alone.
    from tests.core.conftest import GiB, run

    p = run(
        model="meta-llama/Llama-3.1-8B",
        kv_budget_bytes=48 * GiB,
        requests=[{"context_tokens": 8192, "count": 10, "prefix_tokens": 4096}],
    )
    assert p.capacity is not None and p.capacity.max_requests == 94
    assert any(n.code == "capacity.prefix_shared" for n in p.notes_detail)
    off = run(
        model="meta-llama/Llama-3.1-8B",
        kv_budget_bytes=48 * GiB,
        requests=[{"context_tokens": 8192, "count": 10, "prefix_tokens": 4096}],
        enable_prefix_caching=False,
    )
    assert off.capacity is not None and off.capacity.max_requests == 47
