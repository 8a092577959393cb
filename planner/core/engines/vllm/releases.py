"""When each vLLM rule started to hold: the first release (minor, or a patch release) whose
shipped code has it, read in vLLM's wheels; the rules themselves are in this package."""

from __future__ import annotations

# Async scheduling on by default for generative models (SchedulerConfig.async_scheduling=None
# resolved in VllmConfig.__post_init__, PR #27614); 0.14 alone turned it off again under PP.
ASYNC_DEFAULT_SINCE = (0, 14)
# Async scheduling together with pipeline parallelism (PR #32359); before, refused.
ASYNC_WITH_PP_SINCE = (0, 15)
# Window admission counts every in-flight batch: max_in_flight_tokens = max_concurrent_batches ×
# max_num_batched_tokens (VllmConfig.max_in_flight_tokens); before, one batch (PR #47728).
IN_FLIGHT_ADMISSION_SINCE = (0, 26)
# The V2 model runner is the default for every model; with async scheduling it keeps pp + 1
# batches in flight (VllmConfig.max_concurrent_batches).
V2_RUNNER_SINCE = (0, 29)
# "GPU KV cache size: N tokens" = int(max_concurrency × max_model_len) (get_kv_cache_capacity);
# before, num_blocks // groups × block_size. A patch release: 0.20.0 still had the old one.
TOKENS_FROM_CONCURRENCY_SINCE = (0, 20, 1)
# gpu_memory_utilization default 0.92 (vllm/config/cache.py, PR #38284); 0.9 before.
UTIL_092_SINCE = (0, 20)
# MLA on Hopper: an explicit --block-size is honoured (a backend that supports it is chosen)
# and a 16-bit cache gets FlashAttention-MLA's 16; before, FlashMLA forced blocks of 64.
MLA_BLOCK_HONOURED_SINCE = (0, 18)
# MLA backends from a priority list (FlashAttention-MLA first), blocks forced to a multiple of
# 64 until 0.18; in 0.11.0 FlashMLA and 64 always.
MLA_BACKEND_PRIORITY_SINCE = (0, 11, 1)
# MLA backends validate the KV and model dtypes (none takes fp8_e5m2 or float32); 0.11.0
# did not check them when the config was built.
MLA_DTYPE_CHECK_SINCE = (0, 11, 1)
# bfloat16 in the MLA backends' KV-cache dtypes (0.11.1–0.14: no backend for it on SM90).
MLA_BF16_KV_SINCE = (0, 15)
# CacheDType gains float16 (0.18) and per-token-head scales (0.20).
FLOAT16_KV_SINCE = (0, 18)
PER_TOKEN_HEAD_KV_SINCE = (0, 20)
# VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 1 (was 0).
CHUNKED_HYBRID_DEFAULT_SINCE = (0, 14)
FLASHMLA_BLOCK = 64
# "GPU KV cache size" and "Maximum concurrency" are logged once all workers take the smallest
# num_blocks (_report_kv_cache_config); before, each worker logged its own, worker 0 first.
LOG_AFTER_MIN_SINCE = (0, 11, 1)
# The start check and the max-length estimate count what one request takes from the pool
# (padding included) and hold the null block back (PR #47272).
POOL_NEED_SINCE = (0, 29)
# Hybrids: the start check and the max-length estimate count the groups
# (kv_cache_utils._max_memory_usage_bytes_from_groups): group_size × page × the blocks of the
# FIRST group only (0.14.1–0.18.1: `any_spec = kv_cache_groups[0].kv_cache_spec`), then of
# every group (0.19.1); before 0.14, Σ layers' max_memory_usage_bytes.
GROUPS_NEED_SINCE = (0, 14)
GROUPS_NEED_ALL_SINCE = (0, 19)
# EngineArgs.get_batch_defaults: GPUs of 160 GiB or more get max_num_batched_tokens 16384.
BIG_GPU_16K_SINCE = (0, 28)
# Hybrid group size (_get_kv_cache_groups_uniform_page_size): the largest bucket when it is
# below ratio × the smallest: never up to 0.11, 1.25 in 0.12–0.17, 1.5 from 0.18.
GROUP_RATIO_125_SINCE = (0, 12)
GROUP_RATIO_15_SINCE = (0, 18)
