"""Every worked number in ../shared/seeds, reproduced through the planner's one entry point."""

from __future__ import annotations

import math

import pytest

from tests.core.conftest import SEED_CONFIG, GiB, KiB, MiB, run


def test_128_kib_per_token_and_1_gib_at_8192() -> None:
    # seed 000: "128 KiB/token; 8192 tokens = 1.000 GiB"; seed 003 "每个 token 的所有层 KV 是
    # 131072 bytes = 128 KiB".
    p = run(model=SEED_CONFIG, context_tokens=8192)
    assert p.kv_bytes_per_token == 131072 == 128 * KiB
    assert p.requests[0].kv_bytes == GiB
    assert p.kv_bytes_per_token_formula.startswith("2 × 32 × 8 × 128 × 2 B")


def test_512_mib_at_4096_and_4_gib_for_eight() -> None:
    # seed 004 §05: KV = 2 × 32 × 8 × 128 × 4096 × 2 = 536,870,912 B = 512 MiB; 8 requests ≈ 4 GiB.
    p = run(model=SEED_CONFIG, requests=[{"context_tokens": 4096, "count": 8}])
    assert p.requests[0].kv_bytes == 536_870_912 == 512 * MiB
    assert p.totals.kv_bytes == 4 * GiB


def test_32_kv_heads_gives_2_gib() -> None:
    # seed 004 §05: "若同层数与维度改为32个 KV 头，单请求容量变为2 GiB" (at 4096 tokens).
    p = run(model={**SEED_CONFIG, "num_key_value_heads": 32}, context_tokens=4096)
    assert p.requests[0].kv_bytes == 2 * GiB


def test_query_heads_do_not_enter_the_formula() -> None:
    # seed 000: "增加 Hq，保持 Hkv 不变，确认缓存元素数不变".
    a = run(model=SEED_CONFIG, context_tokens=4096)
    b = run(model={**SEED_CONFIG, "num_attention_heads": 64}, context_tokens=4096)
    assert a.requests[0].kv_bytes == b.requests[0].kv_bytes


@pytest.mark.parametrize(
    ("tp", "heads", "replication", "physical"), [(8, 1, 1, GiB), (16, 1, 2, 2 * GiB)]
)
def test_tp8_vs_tp16_per_rank_and_replication(
    tp: int, heads: int, replication: int, physical: int
) -> None:
    # seed 000 "每卡 KV 不是总量除以卡数就结束": 32 layers, 8192 tokens, 8 KV heads, d=128, bf16:
    # logical 1 GiB; at TP=16 each KV head is held by 2 ranks.
    p = run(model=SEED_CONFIG, context_tokens=8192, tensor_parallel_size=tp)
    assert p.totals.kv_bytes == GiB
    assert p.per_rank.kv_heads == heads
    assert p.per_rank.replication == replication
    assert p.totals.per_rank_kv_bytes == GiB // 8  # one head of eight, every layer
    assert p.totals.physical_kv_bytes == physical


def test_lengths_are_summed_not_padded() -> None:
    # seed 000 "请求长短不同，要把各自长度加起来 … 若全部填充到 8192，会占 3 GiB".
    p = run(model=SEED_CONFIG, requests=[{"context_tokens": n} for n in (8192, 4096, 2048)])
    assert p.totals.kv_bytes == (8192 + 4096 + 2048) * 128 * KiB
    assert p.totals.padded_kv_bytes == 3 * GiB


def test_block_rounding_per_request() -> None:
    # seed 000: "分页按块取整，还要加尾块": 1000 tokens in 16-token blocks take 63 blocks.
    p = run(model=SEED_CONFIG, requests=[{"context_tokens": 1000}, {"context_tokens": 17}])
    assert [r.blocks for r in p.requests] == [63, 2]
    assert p.requests[0].paged_kv_bytes == 63 * 16 * 128 * KiB
    assert p.totals.paged_kv_bytes == (63 + 2) * 16 * 128 * KiB


def test_1_gib_at_1_5_tbps_is_0_716_ms() -> None:
    # seed 000 "把字节数变成延迟下界": 1 GiB read once at 1.5 TB/s (decimal) ≈ 0.716 ms.
    p = run(model=SEED_CONFIG, context_tokens=8192, bandwidth_bytes_per_s=1.5e12, weights_bytes=0)
    assert p.bounds is not None
    assert p.bounds.kv_read_seconds == pytest.approx(0.716e-3, abs=0.0005e-3)
    assert p.bounds.decode_step_seconds == p.bounds.kv_read_seconds


def test_decode_intensity_about_1_flop_per_byte_and_gqa_raises_it() -> None:
    # seed 000 "为什么单 query 的算术强度很低": 2 FLOP per multiply-add, b = 2 → ≈ 1 FLOP/byte;
    # "GQA 若多个 Q 共享一次 KV 读取，强度可提高".
    mha = run(
        model={**SEED_CONFIG, "num_key_value_heads": 32},
        context_tokens=8192,
        bandwidth_bytes_per_s=1.5e12,
        weights_bytes=0,
    )
    gqa = run(model=SEED_CONFIG, context_tokens=8192, bandwidth_bytes_per_s=1.5e12, weights_bytes=0)
    assert mha.bounds is not None and gqa.bounds is not None
    assert mha.bounds.arithmetic_intensity_flops_per_byte == pytest.approx(1.0)
    assert gqa.bounds.arithmetic_intensity_flops_per_byte == pytest.approx(4.0)  # 32/8 share
    assert gqa.bounds.arithmetic_intensity_mha_flops_per_byte == pytest.approx(1.0)
    # Longer history does not raise it ("把历史加长 … 强度不会自动提升").
    longer = run(
        model=SEED_CONFIG, context_tokens=65536, bandwidth_bytes_per_s=1.5e12, weights_bytes=0
    )
    assert longer.bounds is not None
    assert longer.bounds.arithmetic_intensity_flops_per_byte == pytest.approx(4.0)


def test_48_gib_question() -> None:
    # seed 000 "48 GiB 还能同时接几条请求？": 1 GiB per 8k request → 48 with no paging; vLLM
    # reserves block 0 (engine_rules.md §1.3 step 4), so 47 are resident while its log says 48.00x.
    plain = run(
        model=SEED_CONFIG, engine="transformers", context_tokens=8192, kv_budget_bytes=48 * GiB
    )
    assert plain.capacity is not None and plain.capacity.max_requests == 48
    vllm = run(
        model="meta-llama/Llama-3.1-8B",
        kv_cache_dtype="bf16",
        context_tokens=8192,
        kv_budget_bytes=48 * GiB,
    )
    assert vllm.capacity is not None
    assert vllm.capacity.max_requests == 47
    assert vllm.capacity.engine_reported_concurrency == 48.0
    assert vllm.capacity.num_blocks == 48 * GiB // (16 * 131072)
    assert any("48.00x" in n for n in vllm.notes)


def test_fp8_doubles_the_blocks() -> None:
    bf16 = run(
        model="meta-llama/Llama-3.1-8B",
        kv_cache_dtype="bf16",
        context_tokens=8192,
        kv_budget_bytes=48 * GiB,
    )
    fp8 = run(
        model="meta-llama/Llama-3.1-8B",
        kv_cache_dtype="fp8",
        context_tokens=8192,
        kv_budget_bytes=48 * GiB,
    )
    assert bf16.capacity is not None and fp8.capacity is not None
    assert fp8.capacity.num_blocks == 2 * bf16.capacity.num_blocks
    assert fp8.capacity.engine_reported_concurrency == 96.0
    assert fp8.capacity.max_requests == 95


def test_prefill_vs_decode_positions() -> None:
    # seed 004 §04: prompt [A,B,C,D], predicting E, F, G: 4+5+6 = 15 positions without a cache,
    # 4+1+1 = 6 with one.
    p = run(model=SEED_CONFIG, context_tokens=4, output_tokens=3)
    assert p.generation is not None
    assert p.generation.positions_without_cache == 15
    assert p.generation.positions_with_cache == 6


def test_compress_kv_by_half_amdahl() -> None:
    # seed 000 "压缩 KV 一半，端到端能快多少？": attention is about half the step at 32K, so
    # halving KV bytes speeds the step by 1 / (0.5 + 0.5 × 0.5) = 4/3, not 2. The seed's
    # idealisation streams every weight byte: no model_type, so no class defaults (vocab,
    # MLP width) give a weight split whose embedding table a step would only index.
    untyped = {k: v for k, v in SEED_CONFIG.items() if k != "model_type"}
    p = run(
        model=untyped,
        context_tokens=8192,
        bandwidth_bytes_per_s=1.5e12,
        weights_bytes=GiB,
        kv_compression_ratio=0.5,
        kv_budget_bytes=GiB + 16 * 128 * KiB,
    )
    assert p.bounds is not None and p.bounds.what_if is not None
    assert p.bounds.attention_share == pytest.approx(0.5)
    assert p.bounds.what_if.speedup == pytest.approx(4 / 3)
    # And capacity doubles: the same budget holds twice the (halved) requests.
    assert p.capacity is not None and p.capacity.max_requests == 1
    assert p.bounds.what_if.max_requests == 2


def test_context_sweep_attention_share_grows() -> None:
    # seed 000 "用长度扫描定位瓶颈": attention grows with history, the fixed part does not.
    p = run(
        model="meta-llama/Llama-3.1-8B",
        context_tokens=32768,
        gpu="H100-SXM-80GB",
        requests=[{"context_tokens": 32768}],
    )
    assert p.bounds is not None
    shares = [pt.attention_share for pt in p.bounds.context_sweep]
    assert shares == sorted(shares) and shares[0] < 0.5
    assert all(
        math.isclose(pt.weights_read_seconds, p.bounds.weights_read_seconds)
        for pt in p.bounds.context_sweep
    )
