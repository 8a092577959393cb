"""Engine rules beyond the §6.2 worked examples: pipeline parallel, hybrid-manager switches,
SGLang's SWA pools, vLLM's batch defaults. Every expected number is derived in a comment from the
engine's own source (cited by file and function), never from kvplan's output."""

from __future__ import annotations

from typing import Any

import pytest

from planner.core.errors import FieldError
from tests.core.conftest import GiB, run

B40 = 40 * GiB


# --- vLLM pipeline parallel: groups are built once for the whole model ---------------------
# vllm/v1/core/kv_cache_utils.py @001cabc1, get_kv_cache_configs: the specs of all workers are
# merged, get_kv_cache_groups runs ONCE on the whole model, the groups are projected on each
# worker (_project_kv_cache_groups_to_worker), each worker gets
# num_blocks = available // page // max(len(projected group)) (get_kv_cache_config_from_groups),
# and every worker then takes the minimum. The scheduler keeps every global group (the projected
# config keeps empty groups too), so a request needs blocks in all of them.
#
# Gemma-3-27B (62 layers; full at 5, 11, …, 59; page 131,072 B; B = 40 GiB):
# global: 52 sliding + 10 full -> group_size 10, sliding split 6 ways as sliding[i::6] -> 7 groups.
# get_pp_indices(62, 4) -> stages of 15, 16, 16, 15 layers (extra layers before the last stage).
# Stage 0 (layers 0-14): full 5, 11 (2); sliding list indices 0-12 -> sliding[0::6] holds 0, 6, 12
# -> largest projected group 3 -> 327,680 // 3 = 109,226 blocks. Stages 1-3 also reach 3 (stage 1:
# full 17, 23, 29; stage 3: full 47, 53, 59), so num_blocks = 109,226.
# ctx 8,192, mnbt 8,192: 1 full group cdiv(8192,16) = 512 + 6 sliding groups
# cdiv(min(1023 + 8192, 8192), 16) + 1 = 513 -> 3,590 blocks per request;
# log 109,226 / 3,590 = 30.43x; resident (109,226 − 1 null) // 3,590 = 30;
# "GPU KV cache size" 109,226 // 7 × 16 = 249,648 tokens.
def test_vllm_pp_projects_whole_model_groups_gemma3_pp4() -> None:
    p = run(
        engine_version="0.19",
        model="google/gemma-3-27b-it",
        context_tokens=8192,
        kv_budget_bytes=B40,
        pipeline_parallel_size=4,
    )
    c = p.capacity
    assert c is not None
    assert p.per_rank.pipeline_stage_layers == [15, 16, 16, 15]
    assert c.num_blocks == 109226
    assert c.blocks_per_request == 3590
    assert len(c.kv_groups) == 7
    assert c.engine_reported_concurrency == 30.43
    assert c.max_requests == 30
    assert c.engine_reported_tokens == 249648


# PP 3 -> stages of 21, 21, 20. Stage 1 (layers 21-41): full 23, 29, 35, 41 = 4 layers in the one
# full group -> 327,680 // 4 = 81,920 blocks (stages 0 and 2 top out at 3 -> 109,226), so
# num_blocks = 81,920. ctx 32,768: 2,048 + 6 × (cdiv(min(1023 + 8192, 32768), 16) + 1 = 577)
# = 5,510 -> 81,920 / 5,510 = 14.87x; (81,920 − 1) // 5,510 = 14.
def test_vllm_pp_min_over_stages_gemma3_pp3() -> None:
    p = run(
        engine_version="0.19",
        model="google/gemma-3-27b-it",
        context_tokens=32768,
        kv_budget_bytes=B40,
        pipeline_parallel_size=3,
    )
    c = p.capacity
    assert c is not None
    assert c.num_blocks == 81920
    assert c.blocks_per_request == 5510
    assert c.engine_reported_concurrency == 14.87
    assert c.max_requests == 14


# --- vLLM --disable-hybrid-kv-cache-manager on a model whose layers all slide ---------------
# kv_cache_utils.py @001cabc1, unify_hybrid_kv_cache_specs: returns at once when the specs are
# already uniform, and rewrites SlidingWindowSpec as FullAttentionSpec only when full-attention
# layers are present too. Mistral-7B-v0.1 (all 32 layers W = 4096) therefore keeps its
# SlidingWindowSpec: same numbers as engine_rules.md §6.2 with the manager on —
# 20,480 blocks, cdiv(min(4095 + 8192, 32768), 16) + 1 = 769 per request, 26.63x, 26 resident.
def test_vllm_disable_hybrid_keeps_window_when_all_layers_slide() -> None:
    p = run(
        engine_version="0.19",
        model="mistralai/Mistral-7B-v0.1",
        context_tokens=32768,
        kv_budget_bytes=B40,
        hybrid_kv_cache_manager=False,
    )
    c = p.capacity
    assert c is not None
    assert (c.num_blocks, c.blocks_per_request, c.max_requests) == (20480, 769, 26)
    assert c.engine_reported_concurrency == 26.63


# --- vLLM default max_num_batched_tokens --------------------------------------------------
# vllm/engine/arg_utils.py EngineArgs.get_batch_defaults: device_memory >= 70 GiB and "a100" not
# in the *device name* -> 8192 for the API server, else 2048. A custom GPU named like an A100
# must get 2048 even though it has no catalog id.
@pytest.mark.parametrize(
    ("name", "expected"),
    [("NVIDIA A100-SXM4-80GB", 2048), ("NVIDIA H100 80GB HBM3", 8192)],
)
def test_vllm_default_mnbt_reads_the_gpu_name(name: str, expected: int) -> None:
    gpu = {"name": name, "memory_bytes": 80 * GiB, "bandwidth_bytes_per_s": 2.0e12}
    p = run(model="meta-llama/Llama-3.1-8B", context_tokens=8192, kv_budget_bytes=B40, gpu=gpu)
    assert p.max_num_batched_tokens == expected


# --- SGLang hybrid SWA pools ----------------------------------------------------------------
# Llama-4-Scout text config (48 layers, 40 q heads, 8 KV heads, head_dim 128, chunk 8,192).
LLAMA4_SCOUT: dict[str, Any] = {
    "architectures": ["Llama4ForConditionalGeneration"],
    "model_type": "llama4",
    "text_config": {
        "model_type": "llama4_text",
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_size": 5120,
        "attention_chunk_size": 8192,
        "max_position_embeddings": 10485760,
        "torch_dtype": "bfloat16",
    },
}


# python/sglang/srt/configs/model_config.py get_hybrid_layer_ids: for Llama4ForConditionalGeneration
# the SWA layers are i with (i+1) % 4 != 0 (36 chunked layers), full the other 12; model_runner
# sets sliding_window_size = attention_chunk_size. pool_configurator.py HybridSWAPoolConfigurator:
# per layer-token 8 × (128 + 128) × 2 = 4,096 B; cell = 4,096 × 12 + 0.8 × 4,096 × 36
# = 167,116.8 B; max_total_num_tokens = int(42,949,672,960 // 167,116.8) = 257,003 (full pool);
# SWA pool int(257,003 × 0.8) = 205,602. ctx 32,768: full 257,003 // 32,768 = 7, SWA
# 205,602 // 8,192 = 25 -> 7 requests (all-full cell 196,608 B would give 218,453 tokens -> 6).
def test_sglang_llama4_chunked_layers_use_the_swa_pool() -> None:
    p = run(model=LLAMA4_SCOUT, engine="sglang", context_tokens=32768, kv_budget_bytes=B40)
    c = p.capacity
    assert c is not None
    assert c.engine_reported_tokens == 257003
    assert c.max_requests == 7


# gpt-oss-120b, page_size 64: per layer-token 8 × (64 + 64) × 2 = 2,048 B, 18 full + 18 SWA
# layers: cell = 2,048 × 18 + 0.8 × 2,048 × 18 = 66,355.2 B; int(B // cell) = 647,269 ->
# full pool aligned to 64: 647,232 tokens = 10,113 pages; SWA pool int(647,232 × 0.8) = 517,785
# aligned down to 64 = 517,760 (_solve_pool_sizes align_page_size). A 100-token request takes
# cdiv(100, 64) = 2 pages = 128 slots in each pool (the allocators hand out whole pages:
# SWATokenToKVPoolAllocator.alloc_extend counts pages): full 10,113 // 2 = 5,056,
# SWA 517,760 // 128 = 4,045 -> 4,045 requests.
def test_sglang_swa_pool_counts_whole_pages() -> None:
    p = run(
        model="openai/gpt-oss-120b",
        engine="sglang",
        context_tokens=100,
        block_size=64,
        kv_budget_bytes=B40,
    )
    c = p.capacity
    assert c is not None
    assert c.engine_reported_tokens == 647232
    assert c.max_requests == 4045


# --- TensorRT-LLM free_gpu_memory_fraction ---------------------------------------------------
# tensorrt_llm/_torch/pyexecutor/resource_manager.py KVCacheManager.calculate_max_num_blocks
# asserts free_mem_fraction < 1.0: TensorRT-LLM refuses 1.0, so the planner must too.
def test_trtllm_rejects_a_fraction_of_one() -> None:
    with pytest.raises(FieldError) as err:
        run(
            model="meta-llama/Llama-3.1-8B",
            engine="trtllm",
            gpu="H100-SXM-80GB",
            gpu_memory_utilization=1.0,
            context_tokens=8192,
        )
    assert err.value.problems[0].field == "gpu_memory_utilization"


# --- where each engine puts the L % pp extra layers ------------------------------------------
# 62 layers over 4 stages leave 2 extra layers. vLLM (vllm/distributed/utils.py get_pp_indices):
# the stages just before the last -> 15, 16, 16, 15. SGLang (python/sglang/srt/distributed/
# utils.py get_pp_indices): "the last 'remainder' partitions" -> 15, 15, 16, 16. TensorRT-LLM
# (tensorrt_llm/mapping.py Mapping.pp_layers, torch.tensor_split): the first ones -> 16, 16, 15, 15.
@pytest.mark.parametrize(
    ("engine", "stages"),
    [("vllm", [15, 16, 16, 15]), ("sglang", [15, 15, 16, 16]), ("trtllm", [16, 16, 15, 15])],
)
def test_pipeline_split_per_engine(engine: str, stages: list[int]) -> None:
    p = run(
        model="google/gemma-3-27b-it",
        engine=engine,
        context_tokens=8192,
        pipeline_parallel_size=4,
    )
    assert p.per_rank.pipeline_stage_layers == stages
