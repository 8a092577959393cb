"""Worked vLLM arithmetic (B = 40 GiB per rank) under vLLM 0.19's rules (one batch of
max_num_batched_tokens in flight for window admission; "GPU KV cache size" = num_blocks //
groups × block_size), the 0.33 defaults measured with vLLM 0.33's own sizing code, plus the
other engines' rules."""

from __future__ import annotations

from typing import Any

import pytest

from planner.catalog import get_model
from planner.core.errors import FieldError
from tests.core.conftest import GiB, run

B40 = 40 * GiB


@pytest.mark.parametrize(
    ("model", "ctx", "extra", "blocks", "need", "logged", "resident"),
    [
        ("meta-llama/Llama-3.1-70B", 32768, {"tensor_parallel_size": 8}, 65536, 2048, 32.0, 31),
        ("meta-llama/Llama-3.1-8B", 8192, {}, 20480, 512, 40.0, 39),
        ("meta-llama/Llama-3.1-8B", 32768, {}, 20480, 2048, 10.0, 9),
        ("mistralai/Mistral-7B-v0.1", 32768, {}, 20480, 769, 26.63, 26),
        ("mistralai/Mistral-7B-v0.1", 8192, {}, 20480, 513, 39.92, 39),
        ("google/gemma-3-27b-it", 32768, {}, 32768, 5510, 5.95, 5),
        ("google/gemma-3-27b-it", 8192, {}, 32768, 3590, 9.13, 9),
        ("google/gemma-3-27b-it", 32768, {"hybrid_kv_cache_manager": False}, 5285, 2048, 2.58, 2),
        ("google/gemma-3-27b-it", 8192, {"hybrid_kv_cache_manager": False}, 5285, 512, 10.32, 10),
        ("google/gemma-2-9b", 8192, {}, 15603, 1025, 15.22, 15),
        ("openai/gpt-oss-120b", 32768, {}, 72817, 2569, 28.34, 28),
        ("openai/gpt-oss-120b", 32768, {"hybrid_kv_cache_manager": False}, 36408, 2048, 17.78, 17),
        ("deepseek-ai/DeepSeek-V3", 32768, {}, 38199, 2048, 18.65, 18),
        ("deepseek-ai/DeepSeek-V3", 32768, {"block_size": 64}, 9549, 512, 18.65, 18),
        ("microsoft/Phi-3-mini-4k-instruct", 4096, {}, 6826, 257, 26.56, 26),
    ],
)
def test_vllm_worked_examples(
    model: str,
    ctx: int,
    extra: dict[str, object],
    blocks: int,
    need: int,
    logged: float,
    resident: int,
) -> None:
    p = run(engine_version="0.19", model=model, context_tokens=ctx, kv_budget_bytes=B40, **extra)
    c = p.capacity
    assert c is not None
    assert c.num_blocks == blocks
    assert c.blocks_per_request == need
    assert c.engine_reported_concurrency == logged
    assert c.max_requests == resident


@pytest.mark.parametrize(
    ("async_scheduling", "need", "logged", "resident"),
    [(None, 1281, 15.99, 15), (True, 1281, 15.99, 15), (False, 769, 26.63, 26)],
)
def test_vllm_033_async_admission_mistral(
    async_scheduling: bool | None, need: int, logged: float, resident: int
) -> None:
    # vLLM 0.33.0's own sizing code (EngineArgs → get_kv_cache_configs → get_kv_cache_capacity)
    # on Mistral-7B, bf16, 40 GiB, 32k: async scheduling (the default) keeps 2 × 8192 tokens in
    # flight, so a sliding group needs cdiv(min(4095 + 16384, 32768), 16) + 1 = 1281 blocks.
    body: dict[str, object] = {"model": "mistralai/Mistral-7B-v0.1", "context_tokens": 32768}
    if async_scheduling is not None:
        body["async_scheduling"] = async_scheduling
    p = run(kv_budget_bytes=B40, **body)
    c = p.capacity
    assert c is not None and p.engine_version == "0.33"
    assert (c.num_blocks, c.blocks_per_request) == (20480, need)
    assert (c.engine_reported_concurrency, c.max_requests) == (logged, resident)


def test_vllm_033_logged_tokens_are_concurrency_times_max_model_len() -> None:
    # vLLM 0.33.0's get_kv_cache_capacity: int(max_concurrency × max_model_len).
    gemma = run(
        model="google/gemma-3-27b-it", context_tokens=32768, kv_budget_bytes=B40,
        async_scheduling=False,
    )  # fmt: skip
    assert gemma.capacity is not None and gemma.capacity.engine_reported_tokens == 194871
    llama = run(
        model="meta-llama/Llama-3.1-8B", context_tokens=12345, kv_budget_bytes=80 * GiB,
        block_size=64,
    )  # fmt: skip
    assert llama.capacity is not None and llama.capacity.engine_reported_tokens == 654988
    old = run(
        model="meta-llama/Llama-3.1-8B", context_tokens=12345, kv_budget_bytes=80 * GiB,
        block_size=64, engine_version="0.20.0",
    )  # fmt: skip
    assert old.capacity is not None and old.capacity.engine_reported_tokens == 655360


def test_llama70b_tp8_and_tp16_per_rank_bytes() -> None:
    # §6.2: per-rank bytes/token 80·2·1·128·2 = 40,960; TP16 identical (heads replicated).
    for tp in (8, 16):
        p = run(model="meta-llama/Llama-3.1-70B", tensor_parallel_size=tp, context_tokens=32768)
        assert p.per_rank.kv_bytes_per_token == 40960
        assert p.per_rank.page_bytes == 8192
    assert (
        run(
            model="meta-llama/Llama-3.1-70B", tensor_parallel_size=16, context_tokens=1
        ).per_rank.replication
        == 2
    )


def test_gemma3_groups_and_padding() -> None:
    # §6.2: 52 sliding + 10 full → group_size 10; 6 sliding groups of 9,9,9,9,8,8 (8 padding
    # layers) + 1 full group; "GPU KV cache size" = 32,768 // 7 · 16 = 74,896 tokens.
    p = run(
        engine_version="0.19",
        model="google/gemma-3-27b-it",
        context_tokens=8192,
        kv_budget_bytes=B40,
    )
    c = p.capacity
    assert c is not None
    sliding = [g for g in c.kv_groups if g.kind == "sliding"]
    assert [g.layers for g in sliding] == [9, 9, 9, 9, 8, 8]
    assert sum(g.padding_layers for g in c.kv_groups) == 8
    assert len(c.kv_groups) == 7
    assert c.engine_reported_tokens == 74896
    assert p.kv_bytes_per_token == 507904  # no-hybrid bytes/token in §6.2


def test_llama8b_logged_tokens() -> None:
    p = run(model="meta-llama/Llama-3.1-8B", context_tokens=8192, kv_budget_bytes=B40)
    assert p.capacity is not None and p.capacity.engine_reported_tokens == 327680


def test_deepseek_mla_bytes_and_replication() -> None:
    # §6.2: head_size 576, one latent, no ×2 → 61·576·2 = 70,272 B/token (fp8: 35,136), on
    # every TP rank.
    for tp in (1, 8):
        p = run(model="deepseek-ai/DeepSeek-V3", tensor_parallel_size=tp, context_tokens=1)
        assert p.kv_bytes_per_token == 70272
        assert p.per_rank.kv_bytes_per_token == 70272
        assert p.per_rank.page_bytes == 18432
    fp8 = run(model="deepseek-ai/DeepSeek-V3", kv_cache_dtype="fp8", context_tokens=1)
    assert fp8.kv_bytes_per_token == 35136
    p8 = run(model="deepseek-ai/DeepSeek-V3", tensor_parallel_size=8, context_tokens=1024)
    assert p8.totals.physical_kv_bytes == 8 * p8.totals.per_rank_kv_bytes


@pytest.mark.parametrize("version", ["0.33", "0.11"])
@pytest.mark.parametrize("block_size", [None, 16, 64, 128])
def test_mla_fp8_e5m2_kv_cache(version: str, block_size: int | None) -> None:
    # vLLM 0.33.0: no MLA backend lists fp8_e5m2 in supported_kv_cache_dtypes at any block size
    # (FlashAttention-MLA: auto/float16/bfloat16; FlashMLA, Triton MLA, FlashInfer-MLA, CUTLASS
    # MLA: those and fp8/fp8_e4m3), so backend selection fails with "kv_cache_dtype not
    # supported" on SM80, SM90 and SM100 alike. 0.11.0 did not check the dtype: it sizes it.
    extra = {"block_size": block_size} if block_size else {}
    body = dict(
        model="deepseek-ai/DeepSeek-V2-Lite", kv_cache_dtype="fp8_e5m2", engine_version=version,
        kv_budget_bytes=B40, context_tokens=8192, **extra,
    )  # fmt: skip
    if version == "0.11":
        assert run(**body).kv_bytes_per_token == 27 * 576
        return
    with pytest.raises(FieldError) as err:
        run(**body)
    assert err.value.problems[0].field == "kv_cache_dtype"


def _v32() -> dict[str, Any]:
    """DeepSeek-V3.2: DeepSeek-V3's shape with the published indexer fields."""
    cfg = dict(get_model("deepseek-ai/DeepSeek-V3").config)
    cfg.update(model_type="deepseek_v32", architectures=["DeepseekV32ForCausalLM"],
               index_head_dim=128, index_n_heads=64, index_topk=2048)  # fmt: skip
    return cfg


@pytest.mark.parametrize(
    ("kv", "dtype", "blocks"),
    [
        # vLLM 0.33 (its own sizing code run on CPU; TP 8, 40 GiB, 32,768 tokens): fp8 goes to
        # FlashMLA-sparse as fp8_ds_mla (656 + 132 indexer B/token), fp8_e4m3 to FlashInfer-
        # MLA-sparse as plain fp8 (576 + 132), a bf16 cache becomes auto for V3.2
        # (DeepseekV32ForCausalLM.verify_and_update_config), so a float16 model keeps it.
        ("fp8", "auto", 13961),
        ("fp8_e4m3", "auto", 15538),
        ("bf16", "float16", 8568),
        ("auto", "float16", 8568),
        # No sparse backend runs a quantized cache with a float16 model.
        ("fp8", "float16", None),
        ("fp8_e4m3", "float16", None),
    ],
)
def test_deepseek_v32_cache_dtypes(kv: str, dtype: str, blocks: int | None) -> None:
    body: dict[str, Any] = dict(
        model=_v32(), kv_cache_dtype=kv, tensor_parallel_size=8, kv_budget_bytes=B40,
        context_tokens=32768, max_num_batched_tokens=8192,
    )  # fmt: skip
    if dtype != "auto":
        body["dtype"] = dtype
    if blocks is None:
        with pytest.raises(FieldError) as err:
            run(**body)
        assert err.value.problems[0].field == "dtype"
        return
    p = run(**body)
    assert p.block_size == 64 and p.capacity is not None
    assert p.capacity.num_blocks == blocks


def test_head_dim_explicit_beats_hidden_over_heads() -> None:
    # §4/§5.3: Qwen3-32B head_dim 128 (hidden/Hq = 80); Gemma-2-9B 256 (224); gpt-oss 64 (45).
    assert run(model="Qwen/Qwen3-32B", context_tokens=1).model.head_dim == 128
    assert run(model="google/gemma-2-9b", context_tokens=1).model.head_dim == 256
    assert run(model="openai/gpt-oss-120b", context_tokens=1).model.head_dim == 64


def test_qwen25_window_disabled() -> None:
    # §1.1: use_sliding_window false → no SWA although sliding_window is published.
    p = run(model="Qwen/Qwen2.5-7B", context_tokens=1)
    assert {g.kind for g in p.model.groups} == {"full"}


def test_trtllm_ceil_heads_and_32_token_blocks() -> None:
    # §3: allocator keeps ceil(Hkv/tp) heads; tokens_per_block 32.
    p = run(
        model="meta-llama/Llama-3.1-70B",
        engine="trtllm",
        tensor_parallel_size=16,
        context_tokens=32768,
        kv_budget_bytes=B40,
    )
    assert p.block_size == 32
    assert p.per_rank.kv_heads == 1
    assert p.per_rank.kv_bytes_per_token == 40960  # the estimator would say 20,480
    assert any("20,480" in n for n in p.notes)
    c = p.capacity
    assert c is not None
    assert c.num_blocks == B40 // 40960 // 32
    assert c.max_requests == c.num_blocks // (32768 // 32)


def test_sglang_token_pool_and_no_swa_for_gemma() -> None:
    # §2: max_total_num_tokens = available // cell (page_size 1); Gemma-2/3 get full-length KV.
    p = run(
        model="meta-llama/Llama-3.1-8B", engine="sglang", context_tokens=8192, kv_budget_bytes=B40
    )
    c = p.capacity
    assert c is not None and p.block_size == 1
    assert c.engine_reported_tokens == B40 // 131072 == 327680
    assert c.max_requests == 40  # no null block, no per-request rounding
    g = run(
        model="google/gemma-3-27b-it", engine="sglang", context_tokens=8192, kv_budget_bytes=B40
    )
    assert g.capacity is not None and g.capacity.max_requests == B40 // (507904 * 8192)


def test_transformers_keeps_w_minus_1_in_sliding_layers() -> None:
    # §4: DynamicSlidingWindowLayer keeps the last sliding_window − 1 tokens.
    p = run(model="mistralai/Mistral-7B-v0.1", engine="transformers", context_tokens=32768)
    assert p.requests[0].kv_bytes == 4095 * 131072


def test_vllm_utilization_is_of_total_and_trtllm_of_free() -> None:
    # §1.4 vs §3: the same fraction gives different pools.
    common = {
        "model": "meta-llama/Llama-3.1-8B",
        "gpu": "H100-SXM-80GB",
        "context_tokens": 8192,
        "gpu_memory_utilization": 0.9,
        "reserve_bytes": 0,
    }
    v = run(**common)
    t = run(**common, engine="trtllm")
    assert v.capacity is not None and t.capacity is not None
    # The H100's memory as torch sees it, 79.19 GiB in vLLM's start-up logs (nvidia-smi's
    # 81,559 MiB includes what the driver keeps back).
    mem = 85029158912
    weights = 8030261248 * 2
    assert v.capacity.kv_budget_bytes == -(-mem * 9 // 10) - weights
    assert t.capacity.kv_budget_bytes == (mem - weights) * 9 // 10


def test_trtllm_windows_are_full_length_unless_max_attention_window_is_set() -> None:
    # TensorRT-LLM PyTorch backend: with KvCacheConfig.max_attention_window unset, every layer
    # is sized for max_seq_len (resource_manager.py; engine_rules.md §3 caveat); set, the list
    # repeats over the layers and windows shorter than max_seq_len are cyclic.
    full = run(
        model="openai/gpt-oss-120b", engine="trtllm", context_tokens=32768, kv_budget_bytes=B40
    )
    assert full.requests[0].kv_bytes == 32768 * 73728
    assert any("max_attention_window" in n for n in full.notes)
    windowed = run(
        model="openai/gpt-oss-120b",
        engine="trtllm",
        context_tokens=32768,
        kv_budget_bytes=B40,
        max_attention_window=[128, 32768],
    )
    per_layer_token = 2 * 8 * 64 * 2
    assert windowed.requests[0].kv_bytes == 18 * per_layer_token * (128 + 32768)
    assert full.capacity is not None and windowed.capacity is not None
    assert windowed.capacity.max_requests > full.capacity.max_requests


def test_max_attention_window_is_trtllm_only() -> None:
    import pytest

    from planner.core.errors import FieldError

    with pytest.raises(FieldError) as info:
        run(model="openai/gpt-oss-120b", context_tokens=1, max_attention_window=[128])
    assert info.value.problems[0].field == "max_attention_window"


def test_default_max_num_seqs_caps_running_requests() -> None:
    # vLLM EngineArgs.get_batch_defaults (`vllm serve`): max_num_seqs 1024 on >= 70 GiB GPUs
    # other than A100, else 256. Memory for 128-token requests holds far more than either.
    h100 = run(model="meta-llama/Llama-3.1-8B", gpu="H100-SXM-80GB", context_tokens=128)
    a100 = run(model="meta-llama/Llama-3.1-8B", gpu="A100-SXM-80GB", context_tokens=128)
    for p, cap in ((h100, 1024), (a100, 256)):
        c = p.capacity
        assert c is not None and c.max_requests > cap
        assert c.max_num_seqs == cap and c.max_running_requests == cap
        assert c.limited_by == "max_num_seqs"
        assert any("--max-num-seqs" in n for n in p.notes)
    mine = run(
        model="meta-llama/Llama-3.1-8B", gpu="H100-SXM-80GB", context_tokens=128, max_num_seqs=4096
    )
    assert mine.capacity is not None and mine.capacity.max_running_requests == min(
        4096, mine.capacity.max_requests
    )
    # A long context is limited by memory, not by the cap.
    long = run(model="meta-llama/Llama-3.1-8B", gpu="H100-SXM-80GB", context_tokens=32768)
    assert long.capacity is not None and long.capacity.limited_by == "kv_blocks"
    assert long.capacity.max_running_requests == long.capacity.max_requests


@pytest.mark.parametrize(
    ("body", "field"),
    [
        # vLLM 0.33 (its own config code, the plain oracle grid): ModelConfig refuses a
        # max_model_len beyond the model's before VllmConfig refuses the fp16 cache of a bf16
        # model...
        ({"model": "meta-llama/Llama-3.1-8B", "kv_cache_dtype": "fp16"}, "context_tokens"),
        # ...and before any MLA backend is chosen; the model dtype is checked before both.
        ({"model": "deepseek-ai/DeepSeek-V2-Lite", "kv_cache_dtype": "fp8_e5m2"}, "context_tokens"),
        ({"model": "google/gemma-2-9b", "dtype": "float16", "kv_cache_dtype": "fp16"}, "dtype"),
    ],
)
def test_vllm_refuses_a_too_long_context_first(body: dict[str, Any], field: str) -> None:
    with pytest.raises(FieldError) as err:
        run(**body, context_tokens=1 << 20, kv_budget_bytes=B40)
    assert err.value.problems[0].field == field
