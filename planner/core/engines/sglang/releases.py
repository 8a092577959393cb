"""SGLang's start-up rules, each with the first release it was read in (the PyPI wheel, file
named). A rule that changed within 0.5.x names the first release with the new rule (`*_SINCE`);
every 0.5.x release is answered, and the release matrix (docs/engine-versions.md) names the
releases whose own code was run against these rules.

The figures are SGLang's own and checked by its code run as an oracle (tests/oracle).
"""

from __future__ import annotations

from planner.core.engines.versions import Version, since
from planner.core.hardware import Gpu

# The release the rules below were read in and the oracle ran (tests/oracle/versions-sglang.txt).
VERIFIED = (0, 5, 23)

MiB_PER_GiB = 1024

# arg_groups/memory_hook.py handle_gpu_memory_settings (0.5.23): chunked_prefill_size and the
# decode CUDA-graph max batch by the GPU's nvidia-smi total (MiB), the batch by TP < 4 or not.
# (upper bound MiB, chunked_prefill_size, graph max batch at TP < 4, at TP ≥ 4)
MEMORY_TIERS: tuple[tuple[float, int, int, int], ...] = (
    (20 * 1024, 2048, 8, 8),  # T4, 4080
    (35 * 1024, 4096, 48, 160),  # A10, 4090, 5090
    (60 * 1024, 4096, 32, 160),  # A100 40 GB, L40
    (90 * 1024, 8192, 256, 512),  # H100, A100 80 GB
    (160 * 1024, 8192, 256, 512),  # H20, H200
    (float("inf"), 16384, 512, 512),  # B200, MI300
)


# The 20–35 GiB tier before 0.5.20 (sglang-0.5.19 wheel, arg_groups/memory_hook.py
# handle_gpu_memory_settings; the same figures in server_args.py _handle_gpu_memory_settings
# back to 0.5.5): chunked_prefill_size 2048, graph max batch 24 at TP < 4, 80 at TP ≥ 4.
MID_TIER_SINCE: Version = (0, 5, 20)
MID_TIER_BEFORE = (2048, 24, 80)

# memory_hook.py handle_gpu_memory_settings: an explicit --max-running-requests caps a default
# decode graph max batch from 0.5.22 (sglang-0.5.22 wheel; 0.5.21's has no such cap).
GRAPH_BS_RUNNING_CAP_SINCE: Version = (0, 5, 22)


def memory_tier(gpu_mib: float, tp: int, version: Version = VERIFIED) -> tuple[int, int]:
    """(chunked_prefill_size, decode CUDA-graph max batch) SGLang picks for this GPU."""
    for bound, chunk, small_tp, big_tp in MEMORY_TIERS:
        if gpu_mib < bound:
            if bound == 35 * 1024 and not since(version, MID_TIER_SINCE):
                chunk, small_tp, big_tp = MID_TIER_BEFORE
            return chunk, small_tp if tp < 4 else big_tp
    raise AssertionError("the last tier is unbounded")


# arg_groups/model_override_base.py get_default_attn_backend and overrides.py
# _mla_backend_page_constraints (0.5.23): with no --attention-backend, MHA models on SM100
# (B200/GB200) run trtllm_mha, which takes pages of 16, 32, 64 or 128 and raises any other
# page (the default 1 included) to 64; MLA models on SM100 run flashinfer (page as given).
TRTLLM_MHA_PAGES = (16, 32, 64, 128)
TRTLLM_MHA_DEFAULT_PAGE = 64


# Prefill CUDA graphs: on CUDA the prefill phase captures "breakable" graphs by default
# (model_executor/cuda_graph_config.py default_prefill_backend, 0.5.21 to 0.5.23) at the
# token counts of arg_groups/cuda_graph_hook.py generate_prefill_cuda_graph_batch_sizes up to
# the chunked prefill size (at most --max-total-tokens), and memory_hook.reserve_for_graph_mb
# reserves 8 MiB per captured size, or 1.5 GiB flat for MLA. With PP > 1 they are opt-in
# (cuda_graph_hook.apply_cuda_graph_compatibility turns the default off).
PREFILL_GRAPH_MIB_PER_SIZE = 8
PREFILL_GRAPH_MLA_MIB = 1536
# Before 0.5.10 prefill (piecewise) CUDA graphs are opt-in (server_args.py
# enable_piecewise_cuda_graph = False, sglang-0.5.8.post1 wheel; 0.5.10.post1 has
# disable_piecewise_cuda_graph = False instead).
PREFILL_GRAPHS_DEFAULT_SINCE: Version = (0, 5, 10)


def prefill_graph_sizes(max_tokens: int) -> int:
    """How many prefill token counts SGLang captures up to `max_tokens`."""
    steps = ((4, 32, 4), (48, 256, 16), (288, 512, 32), (576, 1024, 64), (1280, 4096, 256))
    sizes = [n for lo, hi, step in steps for n in range(lo, hi + 1, step)]
    sizes += range(4608, max_tokens + 1, 512)
    return sum(1 for n in sizes if n <= max_tokens)


def is_sm100(gpu: Gpu | None) -> bool:
    cc = gpu.compute_capability if gpu is not None else None
    return cc is not None and cc // 10 == 10


# arg_groups/fields/model.py --kv-cache-dtype choices (0.5.23), SGLang's spellings; kvplan's
# names for them (mxfp8, nvfp4 and fp4_mx_block16 are SGLang's and not modelled by kvplan).
KV_CACHE_DTYPE_CHOICES = (
    "auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16",
)  # fmt: skip
KV_CACHE_DTYPES = ("auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2")

# mem_cache/kv_cache_configurator.py resolve_max_num_reqs (0.5.23): the default running limit
# is clamp(tokens / context_len × 512, 2048, 4096); an explicit --max-running-requests is
# clamped too; both at most tokens // 2.
RUNNING_ESTIMATE_PER_CONTEXT = 512
RUNNING_ESTIMATE_BOUNDS = (2048, 4096)
# The explicit cap's history (model_runner_kv_cache_mixin._resolve_max_num_reqs, then
# kv_cache_configurator.resolve_max_num_reqs): from 0.5.14 min(requested // dp, tokens // 2)
# (sglang-0.5.14 wheel); 0.5.10–0.5.13 min(requested // dp, the clamped estimate), the default
# at most tokens // 2 (sglang-0.5.10.post1 wheel); before 0.5.10 neither is capped and the
# request is taken as given (model_runner_kv_cache_mixin.init_memory_pool, sglang-0.5.9 wheel).
RUNNING_CAP_TOKENS_SINCE: Version = (0, 5, 14)
RUNNING_CAP_SINCE: Version = (0, 5, 10)


def running_requests(
    requested: int | None,
    pool_tokens: int,
    context_len: int,
    attn_dp: int = 1,
    version: Version = VERIFIED,
) -> int:
    """max_running_requests as SGLang resolves it, per attention-DP worker (an explicit one is
    shared by the workers)."""
    lo, hi = RUNNING_ESTIMATE_BOUNDS
    estimated = int(pool_tokens / max(1, context_len) * RUNNING_ESTIMATE_PER_CONTEXT)
    estimated = max(min(estimated, hi), lo)
    if not since(version, RUNNING_CAP_SINCE):
        return requested if requested is not None else estimated
    if requested is None:
        return min(estimated, pool_tokens // 2)
    per_worker = max(1, requested // attn_dp)
    if not since(version, RUNNING_CAP_TOKENS_SINCE):
        return min(per_worker, estimated)
    return min(per_worker, pool_tokens // 2)


# arg_groups/cuda_graph_hook.py disable_breakable_cudagraph_if_incompatible: KDA hybrids
# (uses_kda_attention, Kimi-Linear) run without the default prefill graphs from 0.5.20
# (sglang-0.5.20 wheel; 0.5.19's rules have no KDA entry, and its oracle run reserves the
# MLA 1.5 GiB for them).
KDA_NO_PREFILL_GRAPHS_SINCE: Version = (0, 5, 20)


# configs/model_config.py is_hybrid_swa_model (0.5.21, 0.5.23): Gemma4ForCausalLM and
# Gemma4ForConditionalGeneration run HybridSWAPoolConfigurator, utils/hf_transformers/config.py
# giving the full layers global_head_dim / num_global_key_value_heads and the sliding ones
# swa_* (read in the sglang-0.5.21 wheel, run at 0.5.23; older releases not read for Gemma-4).
GEMMA4_SWA_SINCE: Version = (0, 5, 21)


# A pipeline stage's hybrid SWA pools from 0.5.7 to 0.5.20: the model runner narrows the model
# config's SWA and full layer ids to range(start_layer, end_layer + 1), one layer past the stage
# (the next stage's first), and the pools are sized with them (model_runner_components/
# layer_setup.py adjust_hybrid_swa_layer_ids, sglang-0.5.19 and 0.5.20 wheels and their oracle
# runs; model_runner.py, the same range, 0.5.7 to 0.5.13 wheels); 0.5.6 took the ids from the
# built model's own layers, and from 0.5.21 the configurator takes the stage's (ModelLayerInfo).
SWA_STAGE_NEXT_LAYER_SINCE: Version = (0, 5, 7)
SWA_STAGE_OWN_LAYERS_SINCE: Version = (0, 5, 21)


def swa_stage_takes_next_layer(version: Version) -> bool:
    return since(version, SWA_STAGE_NEXT_LAYER_SINCE) and not since(
        version, SWA_STAGE_OWN_LAYERS_SINCE
    )


# managers/tp_worker.py get_worker_info (0.5.23): the longest request SGLang admits is
# min(context_len − 1, max_total_num_tokens − 1): one token is kept for the output.
def max_req_len(context_len: int | None, pool_tokens: int) -> int:
    cap = pool_tokens - 1
    return max(0, min(context_len - 1, cap) if context_len else cap)


__all__ = [
    "GEMMA4_SWA_SINCE",
    "GRAPH_BS_RUNNING_CAP_SINCE",
    "KDA_NO_PREFILL_GRAPHS_SINCE",
    "KV_CACHE_DTYPES",
    "KV_CACHE_DTYPE_CHOICES",
    "MEMORY_TIERS",
    "MID_TIER_BEFORE",
    "MID_TIER_SINCE",
    "PREFILL_GRAPHS_DEFAULT_SINCE",
    "PREFILL_GRAPH_MIB_PER_SIZE",
    "PREFILL_GRAPH_MLA_MIB",
    "RUNNING_CAP_SINCE",
    "RUNNING_CAP_TOKENS_SINCE",
    "SWA_STAGE_NEXT_LAYER_SINCE",
    "SWA_STAGE_OWN_LAYERS_SINCE",
    "TRTLLM_MHA_DEFAULT_PAGE",
    "TRTLLM_MHA_PAGES",
    "VERIFIED",
    "is_sm100",
    "max_req_len",
    "memory_tier",
    "prefill_graph_sizes",
    "running_requests",
    "swa_stage_takes_next_layer",
]

# --kv-cache-dtype auto runs an fp8_e4m3 cache when the model's quant_config has
# kv_cache_quant_algo "FP8" (mem_cache/kv_cache_dtype.py configure_kv_cache_dtype, 0.5.19–0.5.23
# alike): ModelOpt FP8/FP4/mixed configs (modelopt_quant.py from_config: a kv_cache_scheme dict
# is FP8 when type float and num_bits 8, else kv_cache_quant_algo), Fp8Config
# (kv_cache_quant_algo) and compressed-tensors (CompressedTensorsConfig.kv_cache_quant_algo:
# FP8 for a static symmetric per-tensor float 8-bit scheme, `is_supported_scheme`).
KV_FP8_METHODS = ("modelopt", "fp8", "compressed-tensors")
