"""SGLang's start-up rules, each with the first release it was read in (the PyPI wheel, file
named); the sizing code of other 0.5.x releases has not been diffed yet, so every 0.5.x release
is answered with these rules (the release matrix names the releases checked).

The figures are SGLang's own and checked by its code run as an oracle (tests/oracle).
"""

from __future__ import annotations

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


def memory_tier(gpu_mib: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, decode CUDA-graph max batch) SGLang picks for this GPU."""
    for bound, chunk, small_tp, big_tp in MEMORY_TIERS:
        if gpu_mib < bound:
            return chunk, small_tp if tp < 4 else big_tp
    raise AssertionError("the last tier is unbounded")


# arg_groups/model_override_base.py get_default_attn_backend and overrides.py
# _mla_backend_page_constraints (0.5.23): with no --attention-backend, MHA models on SM100
# (B200/GB200) run trtllm_mha, which takes pages of 16, 32, 64 or 128 and raises any other
# page (the default 1 included) to 64; MLA models on SM100 run flashinfer (page as given).
TRTLLM_MHA_PAGES = (16, 32, 64, 128)
TRTLLM_MHA_DEFAULT_PAGE = 64


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


def running_requests(
    requested: int | None, pool_tokens: int, context_len: int, attn_dp: int = 1
) -> int:
    """max_running_requests as SGLang resolves it, per attention-DP worker (an explicit one is
    shared by the workers)."""
    if requested is not None:
        return min(max(1, requested // attn_dp), pool_tokens // 2)
    lo, hi = RUNNING_ESTIMATE_BOUNDS
    estimated = int(pool_tokens / max(1, context_len) * RUNNING_ESTIMATE_PER_CONTEXT)
    return min(max(min(estimated, hi), lo), pool_tokens // 2)


# managers/tp_worker.py get_worker_info (0.5.23): the longest request SGLang admits is
# min(context_len − 1, max_total_num_tokens − 1): one token is kept for the output.
def max_req_len(context_len: int | None, pool_tokens: int) -> int:
    cap = pool_tokens - 1
    return max(0, min(context_len - 1, cap) if context_len else cap)


__all__ = [
    "KV_CACHE_DTYPES",
    "KV_CACHE_DTYPE_CHOICES",
    "MEMORY_TIERS",
    "TRTLLM_MHA_DEFAULT_PAGE",
    "TRTLLM_MHA_PAGES",
    "VERIFIED",
    "is_sm100",
    "max_req_len",
    "memory_tier",
    "running_requests",
]
