"""When each vLLM rule started to hold: the first release (minor, or a patch release) whose
shipped code has it, read in vLLM's wheels; the rules themselves are in this package."""

from __future__ import annotations

from planner.core.engines.versions import Releases

# The releases whose rules kvplan models (every minor line, their patch and pre-releases).
RELEASES = Releases(first=(0, 9, 0), last=(0, 33, 0), default=(0, 33, 0))

# --async-scheduling (SchedulerConfig.async_scheduling) first in 0.10.0: 0.9 has no such
# argument, and schedules one batch at a time.
ASYNC_SCHEDULING_SINCE = (0, 10)
# Async scheduling on by default for generative models (SchedulerConfig.async_scheduling=None
# resolved in VllmConfig.__post_init__, PR #27614); 0.14 alone turned it off again under PP.
ASYNC_DEFAULT_SINCE = (0, 14)
# Async scheduling together with pipeline parallelism (PR #32359); before, refused.
ASYNC_WITH_PP_SINCE = (0, 15)
# Async scheduling with an n-gram draft (VllmConfig's async-scheduling checks): before, an
# explicit --async-scheduling is refused ("Currently, async scheduling is only supported with
# EAGLE/MTP/Draft Model/NGram GPU/... kind of speculative decoding") and the default turns it
# off ("Async scheduling not supported with ngram-based speculative decoding"); read in the
# 0.29.0 and 0.32.0 wheels, shown by the draft oracle of each release from 0.21 to 0.32.
NGRAM_ASYNC_SINCE = (0, 33)
# A draft head under pipeline parallelism: before, SpeculativeConfig.create_draft_parallel_config
# copied the target's pipeline_parallel_size into the draft's, and the draft's ModelConfig
# verify_with_parallel_config refuses a model class without SupportsPP ("Pipeline parallelism is
# not supported for this model. Supported models implement the `SupportsPP` interface."): the
# EAGLE / EAGLE3 heads (llama_eagle.py, llama_eagle3.py), DeepSeekMTP and DFlash's draft do not
# implement it; a draft model (a whole LLM) does. 0.30 gives the draft pipeline size 1 (read in
# the 0.29.0 and 0.30.0 wheels, shown by the draft oracle of each release).
DRAFT_PP_SINCE = (0, 30)
PP_REFUSING_DRAFT_METHODS = ("eagle", "eagle3", "mtp", "dflash")
# DeepSeek-V3.2 (sparse MLA) on SM90: FlashMLA-sparse lists fp8 (stored as fp8_ds_mla, 656 B a
# token) but not fp8_e4m3, which FlashInfer-MLA-sparse-SM90 takes next in the priority list and
# stores as plain fp8 latents (576 B; flashmla_sparse.py, flashinfer_mla_sparse_sm90.py
# supported_kv_cache_dtypes, cuda.py _get_backend_priorities); read in 0.33.0, shown by the
# draft oracle of each release from the one named.
SPARSE_PLAIN_FP8_E4M3_SINCE = (0, 30)
# ... and before, no SM90 sparse MLA backend takes fp8_e4m3. FlashAttention-MLA-sparse (float16
# or bfloat16 models, auto / float16 / bfloat16 caches) joins the SM90 list ahead of
# FlashMLA-sparse in the release named; before, FlashMLA-sparse alone (bfloat16 models; auto,
# bfloat16 or fp8 caches): no float16 model, no float16 cache (read in the 0.24.0, 0.25.1 and 0.29.0
# wheels, shown by the draft oracle of each release from 0.21).
SPARSE_FA_SINCE = (0, 25)
# Window admission counts every in-flight batch: max_in_flight_tokens = max_concurrent_batches ×
# max_num_batched_tokens (VllmConfig.max_in_flight_tokens); before, one batch (PR #47728).
IN_FLIGHT_ADMISSION_SINCE = (0, 26)
# The V2 model runner is the default for every model; with async scheduling it keeps pp + 1
# batches in flight (VllmConfig.max_concurrent_batches).
V2_RUNNER_SINCE = (0, 29)
# Before that, the V2 runner is the default only for dense (non-MoE) generative models and the
# MoE architectures listed below, neither hybrid nor attention-free, with no speculative method
# it lacks (`VllmConfig.use_v2_model_runner`, `_is_default_v2_model_runner_model`,
# `_get_v2_model_runner_unsupported_features` and DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES in
# vllm/config/vllm.py, read in the 0.25.1, 0.26.0, 0.27.1 and 0.28.0 wheels; 0.25.1 is the
# oldest read). It shows from 0.26, where window admission counts the in-flight batches: a
# sliding-window model under PP with async scheduling keeps pp + 1 (checked by the 0.28 oracle).
DENSE_V2_RUNNER_SINCE = (0, 25)
# The MoE architectures on the V2 runner by default, with the release that listed each first.
V2_RUNNER_MOE_ARCHITECTURES = {
    "DeepseekV2ForCausalLM": (0, 25),
    "Qwen2MoeForCausalLM": (0, 25),
    "GraniteMoeForCausalLM": (0, 25),
    "InklingForCausalLM": (0, 26),
    "InklingForConditionalGeneration": (0, 26),
    "LongcatFlashNgramForCausalLM": (0, 26),
    "KimiK3ForConditionalGeneration": (0, 27),
    "DeepseekV4ForCausalLM": (0, 28),
}
# Speculative methods the V2 runner drafts with (others, n-gram included, take the V1 runner),
# and EAGLE3 only without pipeline parallelism.
V2_RUNNER_SPEC_METHODS = ("eagle", "eagle3", "mtp", "dflash", "dspark")
# "GPU KV cache size: N tokens" = int(max_concurrency × max_model_len) (get_kv_cache_capacity);
# before, num_blocks // groups × block_size. A patch release: 0.20.0 and 0.20.1rc1 (real
# logs) still had the old one, so 0.20.1's pre-releases come before it (versions.since).
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
# CacheDType gains fp8_inc (0.10.0), bfloat16 (0.11.0; read in the 0.9.0–0.11.0 wheels), float16
# (0.18) and per-token-head scales (0.20).
FP8_INC_KV_SINCE = (0, 10)
BF16_KV_SINCE = (0, 11)
FLOAT16_KV_SINCE = (0, 18)
PER_TOKEN_HEAD_KV_SINCE = (0, 20)
# The kvplan KV dtype names a release's CacheDType lacks before the release named.
KV_DTYPE_SINCE = {
    "fp8_inc": FP8_INC_KV_SINCE,
    "bf16": BF16_KV_SINCE,
    "fp16": FLOAT16_KV_SINCE,
    "int8_per_token_head": PER_TOKEN_HEAD_KV_SINCE,
    "fp8_per_token_head": PER_TOKEN_HEAD_KV_SINCE,
}
# The hybrid KV-cache manager (kv_cache_utils._get_kv_cache_config_uniform_page_size) and
# get_max_concurrency_for_kv_cache_config, first in 0.9.1: 0.9.0 sizes a model with sliding and
# full layers all full length (unify_hybrid_kv_cache_specs) and logs the concurrency as
# num_blocks × block_size / max_model_len (read in the 0.9.0 and 0.9.1 wheels).
HYBRID_ALLOCATOR_SINCE = (0, 9, 1)
# Pipeline parallelism on V1 with the default executor: 0.9.0's _is_v1_supported_oracle takes
# PP only with --distributed-executor-backend ray, mp or external_launcher and falls back to V0
# for the default (None); 0.9.1 lists the default too (engine/arg_utils.py).
PP_V1_DEFAULT_SINCE = (0, 9, 1)
# ChunkedLocalAttentionSpec (v1/kv_cache_interface.py, 0.10.0): before, Llama-4's local layers
# are plain Attention layers (the backend chunks them) with FullAttentionSpec, in the start check
# and the max-length estimate too (read in the 0.9.0–0.9.2 wheels).
CHUNKED_SPEC_SINCE = (0, 10)
# kv_cache_utils.get_kv_cache_configs (0.11.0): the hybrid groups are built once from the whole
# model, each bucket split strided (layers[i::num_groups]), and projected on the pipeline stages.
# Before (0.9.1–0.10.2), each worker groups its own layers (get_kv_cache_config), each bucket
# in consecutive runs of group_size with the padding in the last, every worker takes the
# smallest num_blocks and the scheduler worker 0's groups (unify_kv_cache_configs, EngineCore).
WHOLE_MODEL_GROUPS_SINCE = (0, 11)
# Models with state layers (Mamba, linear attention) run on the V1 engine by default: before,
# EngineArgs._is_v1_supported_oracle falls back to V0 for them ("V1 mamba models are
# unoptimized", 0.9.2–0.10.1; 0.9.0–0.9.1: not V1-compatible at all), unless VLLM_USE_V1=1.
STATE_LAYERS_V1_SINCE = (0, 10, 2)
# VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 1 (was 0).
CHUNKED_HYBRID_DEFAULT_SINCE = (0, 14)
FLASHMLA_BLOCK = 64
# "GPU KV cache size" and "Maximum concurrency" are logged once all workers take the smallest
# num_blocks (_report_kv_cache_config); before, each worker logged its own, worker 0 first.
LOG_AFTER_MIN_SINCE = (0, 11, 1)
# The start check and the max-length estimate hold the null block back (PR #47272).
POOL_NEED_SINCE = (0, 29)
# Hybrids: the start check and the max-length estimate count the groups
# (kv_cache_utils._max_memory_usage_bytes_from_groups): group_size × page × the blocks of the
# FIRST group only (0.14.1–0.18.1: `any_spec = kv_cache_groups[0].kv_cache_spec`), then of
# every group (0.19.1); before 0.14, Σ layers' max_memory_usage_bytes.
GROUPS_NEED_SINCE = (0, 14)
GROUPS_NEED_ALL_SINCE = (0, 19)
# ... and count what one request takes from the pool, padding layers included
# (`_max_memory_usage_bytes_from_groups`: group size × page × the groups' blocks), not the sum
# of the layers' own needs: so in 0.21.0, 0.25.1 and 0.29.0 (read in their wheels, checked by
# the oracle); 0.21 is the first release of that range read, the change may be older.
PADDED_NEED_SINCE = (0, 21)
# EngineArgs.get_batch_defaults: GPUs of 160 GiB or more get max_num_batched_tokens 16384.
BIG_GPU_16K_SINCE = (0, 28)
# Hybrid group size (_get_kv_cache_groups_uniform_page_size): the largest bucket when it is
# below ratio × the smallest: never up to 0.11, 1.25 in 0.12–0.17, 1.5 from 0.18.
GROUP_RATIO_125_SINCE = (0, 12)
GROUP_RATIO_15_SINCE = (0, 18)
# The memory profile (rules.py; `Worker.determine_available_memory`, from 0.12
# `utils/mem_utils.memory_profiling`): 0.9.0 subtracts the whole peak; from 0.9.1 the increase
# during the profile, NCCL set-up charged to it; from 0.11 the snapshot follows
# init_worker_distributed_environment (NCCL no longer charged); from 0.27 consumed memory plus
# the transient peak headroom.
PROFILE_INCREASE_SINCE = (0, 9, 1)
NCCL_UNCHARGED_SINCE = (0, 11)
CONSUMED_TRANSIENT_SINCE = (0, 27)
# requested = ceil(total × gpu_memory_utilization) (v1/worker/utils.request_memory); × util,
# truncated, before.
REQUEST_CEIL_SINCE = (0, 14)
# The one-request check and max-length estimate count the whole model under PP in 0.14–0.16
# (vllm#32105); from 0.17 each worker's own projected layers again.
WHOLE_MODEL_CHECK_SINCE = (0, 14)
WORKER_CHECK_SINCE = (0, 17)
# The dummy sampler's top-k/top-p in Triton (before: PyTorch sort, more bytes per logit).
TRITON_SAMPLER_SINCE = (0, 17)
# CUDA-graph memory estimated and logged (GPUModelRunner.profile_cudagraph_memory, PR #30515),
# subtracted by default from 0.20 (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default "1").
GRAPHS_ESTIMATED_SINCE = (0, 18)
GRAPHS_SUBTRACTED_SINCE = (0, 20)
# Speculative method "dflash" (SpeculativeConfig.method, vllm/config/speculative.py; absent in
# 0.19.1's wheel, present in 0.20.0's); its drafter reserves k lookahead slots, k + 1 from 0.23
# (v1/core/sched/scheduler.py, then VllmConfig.num_lookahead_tokens from 0.28).
DFLASH_SINCE = (0, 20)
DFLASH_FILL_IN_SLOT_SINCE = (0, 23)

# Architectures of the catalog that a release's registry (model_executor/models/registry.py)
# lists first after 0.9.0, with that release (read in the 0.9.0–0.11.0 wheels).
ARCHITECTURE_SINCE = {
    "Glm4MoeForCausalLM": (0, 10, 0),
    "GptOssForCausalLM": (0, 10, 1),
    "Qwen3NextForCausalLM": (0, 10, 2),
}

# -- what each release's start-up log looks like ------------------------------------------------
# The fact kinds (engines/vllm/logs.py) whose source line a log prints ("[gpu_worker.py:298]
# Available KV cache memory: …"), and the file that logs each.
LOG_LINE_FILES = {
    "available_kv": "gpu_worker.py",
    "kv_tokens": "kv_cache_utils.py",
    "max_concurrency": "kv_cache_utils.py",  # on the KV-size line from 0.28
    "weights": "gpu_model_runner.py",
}
# Per release on the package index, the line of each of those logger calls (in LOG_LINE_FILES'
# order), read in its wheel (vllm/v1/worker/gpu_worker.py, v1/core/kv_cache_utils.py,
# v1/worker/gpu_model_runner.py: the line where the call starts, which is what the log prints;
# the real logs of stated 0.10.1, 0.11.0, 0.19.0 and 0.21.0 in tests/fixtures print exactly
# these). 0.9.0 logs no "Available KV cache memory" line; 0.9.1–0.10.2 have a second KV-size
# call.
LOG_SOURCE_LINES: dict[str, tuple[tuple[int, ...], ...]] = {
    "0.9": ((), (637,), (640,), (1549,)),
    "0.9.1": ((227,), (715, 870), (719, 874), (1624,)),
    "0.9.2": ((232,), (716, 873), (720, 877), (1801,)),
    "0.10": ((255,), (833, 997), (837, 1001), (1892,)),
    "0.10.1": ((276,), (849, 1013), (853, 1017), (2007,)),
    "0.10.2": ((298,), (864, 1028), (868, 1032), (2392,)),
    "0.11": ((298,), (1087,), (1091,), (2653,)),
    "0.11.1": ((359,), (1229,), (1234,), (3334,)),
    "0.11.2": ((359,), (1229,), (1234,), (3338,)),
    "0.12": ((359,), (1286,), (1291,), (3549,)),
    "0.13": ((375,), (1291,), (1296,), (3659,)),
    "0.14": ((358,), (1305,), (1310,), (3905,)),
    "0.14.1": ((358,), (1305,), (1310,), (3905,)),
    "0.15": ((356,), (1307,), (1312,), (4118,)),
    "0.15.1": ((356,), (1307,), (1312,), (4130,)),
    "0.16": ((373,), (1307,), (1312,), (4221,)),
    "0.17": ((424,), (1314,), (1319,), (4338,)),
    "0.17.1": ((424,), (1314,), (1319,), (4364,)),
    "0.18": ((456,), (1316,), (1321,), (4566,)),
    "0.18.1": ((456,), (1316,), (1321,), (4566,)),
    "0.19": ((436,), (1319,), (1324,), (4820,)),
    "0.19.1": ((436,), (1319,), (1324,), (4820,)),
    "0.20": ((440,), (1711,), (1716,), (4879,)),
    "0.20.1": ((440,), (1708,), (1709,), (4879,)),
    "0.20.2": ((440,), (1708,), (1709,), (4879,)),
    "0.21": ((462,), (1710,), (1711,), (4959,)),
    "0.22": ((466,), (1733,), (1734,), (5132,)),
    "0.22.1": ((466,), (1733,), (1734,), (5132,)),
    "0.23": ((480,), (1744,), (1745,), (5187,)),
    "0.24": ((508,), (2146,), (2147,), (5255,)),
    "0.25": ((538,), (2146,), (2147,), (5306,)),
    "0.25.1": ((538,), (2146,), (2147,), (5306,)),
    "0.26": ((560,), (2177,), (2178,), (5347,)),
    "0.27": ((563,), (2235,), (2236,), (5405,)),
    "0.27.1": ((563,), (2235,), (2236,), (5405,)),
    "0.28": ((578,), (1869,), (1869,), (5515,)),
    "0.29": ((625,), (2032,), (2032,), (5471,)),
    "0.30": ((640,), (2395,), (2395,), (5416,)),
    "0.31": ((692,), (2464,), (2464,), (5354,)),
    "0.32": ((759,), (2327,), (2327,), (5149,)),
    "0.33": ((772,), (1147,), (1147,), (5088,)),
}  # fmt: skip
# A log with none of those lines but a "GPU KV cache size" line apart from the concurrency comes
# from 0.9 to 0.27 (one line from 0.28); nothing in it says which: 0.19 is assumed, the release
# most public logs of that form come from.
SEPARATE_LINES_RELEASES = ("0.9", "0.27")
SEPARATE_LINES_ASSUMED = "0.19"

# -- state layers (Mamba, gated delta nets, KDA, short convolutions): engines/vllm/hybrid.py ----
# The two rule sets: 0.10.2–0.11 (prefix caching off for hybrids, one state block per request) and
# the one read from 0.14 on (`mamba_cache_mode` from 0.15; the block alignment after load from
# 0.20, whose MambaModelConfig and update_block_size_for_backend are 0.21.0's; before, while the
# config is built: HYBRID_ALIGN_AFTER_LOAD_SINCE; 0.14 without cache modes:
# MAMBA_CACHE_MODES_SINCE). 0.12-0.13 are refused; each release of the
# range was checked by its own code (tests/oracle).
OLD_STATE_RULES = ((0, 10, 2), (0, 11, 99))
STATE_RULES_SINCE = (0, 14)
# Prefix caching is on by default for hybrids as for every model; before, hybrids opt in
# (EngineArgs._set_default_chunked_prefill_and_prefix_caching_args: `and not is_hybrid` in
# 0.26 – 0.27, ModelConfig.is_prefix_caching_supported False for "hybrid" before).
HYBRID_PREFIX_DEFAULT_SINCE = (0, 28)
# Before it, prefix caching picks mamba_cache_mode "all" for models that declare Mamba prefix
# caching (SupportsMambaPrefixCaching: MambaModelConfig.verify_and_update_config), "align" for
# the others: "all" keeps a state block per mamba_block_size tokens, which the platform aligns
# to lcm(the model's Mamba chunk size, the kernel block) (`Platform._align_hybrid_block_size`).
ALIGN_MODE_ONLY_SINCE = (0, 28)
MAMBA_PREFIX_CACHING_TYPES = frozenset(
    {"granitemoehybrid", "falcon_h1", "nemotron_h", "jamba", "mamba", "falcon_mamba", "mamba2",
     "zamba2", "bamba"}
)  # fmt: skip
# BambaForCausalLM no longer declares it (0.24.0's bamba.py).
BAMBA_ALIGN_SINCE = (0, 24)
# With speculative decoding too (MambaSpec counts its blocks in "all" mode); 0.20-0.21 take
# "align" for them when a speculative config is set (MambaModelConfig, 0.20.2's and 0.21.0's),
# 0.19 "all" (0.19.1's).
ALL_MODE_WITH_SPEC_SINCE = (0, 22)
ALIGN_MODE_WITH_SPEC_SINCE = (0, 20)
# Before 0.20 the block is raised while the config is built (HybridAttentionMambaModelConfig.
# verify_and_update_config, read in the 0.18.1 and 0.19.1 wheels): aligned to the kernel block
# alone (16; 64 for MLA, 128 only with --attention-backend CUTLASS_MLA), where the platform's
# _align_hybrid_block_size after load (0.20+) aligns to max(kernel block, --block-size). The
# executor's update_block_size_for_backend then sets a default block back to 16, and
# unify_kv_cache_spec_page_size multiplies the attention spec back to the padded state page:
# the attention group runs at the raised block either way (shown by 0.18.1's and 0.19.1's oracles).
HYBRID_ALIGN_AFTER_LOAD_SINCE = (0, 20)
# mamba_cache_mode ("none" / "all" / "align"); before, prefix caching keeps a state block for
# every block of tokens (mamba_block_size = the block, whole Mamba chunks) for the models that
# declare Mamba prefix caching, and is switched off for the others (MambaModelConfig, read in
# the 0.14.1 wheel, shown by its oracle).
MAMBA_CACHE_MODES_SINCE = (0, 15)
# Async scheduling with Mamba prefix caching (mamba_cache_mode "all" / "align"): 0.16 alone
# refuses an explicit --async-scheduling ("Currently, async scheduling is not compatible with
# prefix caching for Mamba models", VllmConfig.__post_init__) and turns the default off; read in
# the 0.15.1, 0.16.0 and 0.17.1 wheels, shown by their oracles.
ASYNC_MAMBA_PREFIX_REFUSED = ((0, 16), (0, 17))  # from the first, before the second
CONFIG_MLA_ALIGNMENT = 64
# A short convolution's conv state keeps kernel − 1 + speculative-token rows (ShortConv
# get_state_shape passes num_spec); before, kernel − 1 (read in the 0.21.0–0.29.0 wheels).
SHORT_CONV_SPEC_ROWS_SINCE = (0, 29)
# Text-only Qwen3.5 checkpoints (Qwen3_5ForCausalLM, model_type qwen3_5_text): served by every
# release from 0.21 (before 0.27 through the multimodal class), but SpeculativeConfig.
# hf_config_override maps their model_type to an MTP draft only from 0.28; before, "Unsupported
# speculative method: 'mtp'" (read in the 0.21.0-0.28.0 wheels, shown by 0.21-0.27's oracle).
QWEN3_5_TEXT_MTP_SINCE = (0, 28)
# ... and their gated delta nets keep the recurrent state in the config's mamba_ssm_dtype
# (float32) only from 0.25, whose VllmConfig normalizes the architecture before looking up the
# per-architecture config hook (Qwen3_5ForConditionalGenerationConfig); before, the state is in
# the model's dtype (shown by 0.21-0.24's oracle).
QWEN3_5_TEXT_FP32_SINCE = (0, 25)
QWEN3_5_TEXT_ARCHITECTURES = ("Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM")
# MLA hybrids align the block to at least 128 (TRTLLM/FlashInfer MLA decode kernels).
MLA_HYBRID_128_SINCE = (0, 27)
# MambaMixer2.get_kv_cache_spec declares one prefill checkpoint block (align mode).
MAMBA2_CHECKPOINT_SINCE = (0, 32)
# GDN layers export prefill checkpoints (FlashInfer prefill on SM90) and the platform aligns to
# them (QwenGatedDeltaNetAttention._exports_checkpoints, get_mamba_prefill_checkpoint_alignment).
GDN_CHECKPOINT_SINCE = (0, 33)
# --kv-cache-dtype auto takes a ModelOpt checkpoint's KV cache dtype: EngineArgs.
# create_engine_config passes it through utils/torch_utils.resolve_kv_cache_dtype_string /
# get_kv_cache_quant_algo_string (quant_method modelopt*: kv_cache_scheme {type float,
# num_bits 8, dynamic false} or kv_cache_quant_algo "fp8" → fp8_e4m3, anything else → auto);
# 0.9.2–0.13.0 have neither function (read in every wheel of tests/oracle/versions.txt).
MODELOPT_KV_AUTO_SINCE = (0, 14)
# ... and from 0.20 also "nvfp4" (MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP) and a 4-bit float scheme
# → nvfp4; before, those fall back to auto (0.19.1 and 0.20.2 torch_utils.py).
MODELOPT_KV_NVFP4_SINCE = (0, 20)
# A compressed-tensors kv_cache_scheme sets the Attention layer's cache to "fp8" (float8_e4m3fn)
# in its constructor (attention.py `kv_cache_scheme = getattr(quant_config, ...)`, 0.15.1
# attention/layer.py, 0.16.0+ model_executor/layers/attention/attention.py; MLAAttention has no
# such rule); 0.9.2–0.14.1 have none. Until 0.21 whatever --kv-cache-dtype asked; ...
CT_KV_SCHEME_SINCE = (0, 15)
# ... from 0.22 only for auto ("an explicit choice (e.g. bfloat16) must win", 0.22.1).
CT_KV_SCHEME_AUTO_ONLY_SINCE = (0, 22)
