"""vLLM's start-up checks, in order, with the error text each release prints (read in the
released wheels: `v1/core/kv_cache_utils.py` `check_enough_kv_cache_memory`, from 0.14
`_check_enough_kv_cache_memory`, in 0.33 `kv_cache_planning.py`; `gpu_worker.py` for the free-
memory check at init)."""

from __future__ import annotations

from collections.abc import Callable

from planner.core.budget.terms import StartVerdict
from planner.core.engines.versions import since
from planner.core.engines.vllm.rules import parse_vllm_version, vllm_rules
from planner.core.errors import FieldError
from planner.core.units import GiB

_DOCS = " See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."


def _r2(n: int) -> str:
    """`format_gib` / `GiB` in vLLM: str(round(bytes / GiB, 2)), e.g. '24.0', '-1.44'."""
    return f"{round(n / GiB, 2)}"


def no_memory_text(engine_version: str) -> str:
    v = parse_vllm_version(engine_version)
    head = "No available memory for the cache blocks. "
    if since(v, (0, 22)):
        return (
            head + "Try increasing `gpu_memory_utilization` when initializing the engine "
            "(this flag also controls CPU memory reservation on the CPU backend, despite its "
            "name)." + _DOCS
        )
    text = head + "Try increasing `gpu_memory_utilization` when initializing the engine."
    return text + _DOCS if since(v, (0, 13)) else text


def max_len_text(
    engine_version: str,
    *,
    max_model_len: int,
    needed_bytes: int,
    available_bytes: int,
    estimated_max_model_len: int,
) -> str:
    v = parse_vllm_version(engine_version)
    w = estimated_max_model_len
    if since(v, (0, 14)):
        est = (
            f"Based on the available memory, the estimated maximum model length is {w}. "
            if w > 0
            else ""
        )
        model = "model's" if since(v, (0, 22)) else "models's"
        tail = (
            "Try increasing `gpu_memory_utilization` (which also controls CPU memory on the "
            "CPU backend) or decreasing `max_model_len` when initializing the engine."
            if since(v, (0, 22))
            else "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
            "initializing the engine."
        )
        return (
            f"To serve at least one request with the {model} max seq len ({max_model_len}), "
            f"({_r2(needed_bytes)} GiB KV cache is needed, which is larger than the available "
            f"KV cache memory ({_r2(available_bytes)} GiB). {est}{tail}{_DOCS}"
        )
    if v[:3] == (0, 9, 0):
        # 0.9.0's estimate message lost its second line (a bare f-string statement).
        est = " Based on the available memory," if w > 0 else ""
        sep = ""
    else:
        est = (
            f"Based on the available memory, the estimated maximum model length is {w}."
            if w > 0
            else ""
        )
        sep = " "
    text = (
        f"To serve at least one request with the models's max seq len ({max_model_len}), "
        f"({needed_bytes / GiB:.2f} GiB KV cache is needed, which is larger than the available "
        f"KV cache memory ({available_bytes / GiB:.2f} GiB).{sep}{est} Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    )
    return text + _DOCS if since(v, (0, 13)) else text


def init_free_memory_text(
    engine_version: str,
    *,
    free_bytes: int,
    total_bytes: int,
    gpu_memory_utilization: float,
    requested_bytes: int,
    device: str = "cuda:0",
) -> str:
    v = parse_vllm_version(engine_version)
    where = f"Free memory on device {device} " if since(v, (0, 14)) else "Free memory on device "
    return (
        f"{where}({_r2(free_bytes)}/{_r2(total_bytes)} GiB) on startup is less than desired "
        f"GPU memory utilization ({gpu_memory_utilization}, {_r2(requested_bytes)} GiB). "
        "Decrease GPU memory utilization or reduce GPU memory used by other processes."
    )


def vllm_check_memory_bytes(
    engine_version: str, kv_budget_bytes: int, pool_bytes_per_block: int
) -> int:
    """The budget vLLM's one-request check and max-length estimate use: from 0.29 the null
    block (one block of the whole pool on this worker) is held back first."""
    if vllm_rules(engine_version).null_block_in_check:
        return kv_budget_bytes - pool_bytes_per_block
    return kv_budget_bytes


def vllm_estimate_max_model_len(
    check_memory_bytes: int, max_model_len: int, needed_bytes_for_len: Callable[[int], int]
) -> int:
    """vLLM's `estimate_max_model_len`: binary search for the longest length in
    [1, max_model_len] whose one-request KV fits; 0 if even one token does not."""
    if needed_bytes_for_len(1) > check_memory_bytes:
        return 0
    lo, hi, best = 1, max_model_len, 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if needed_bytes_for_len(mid) <= check_memory_bytes:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def vllm_start_check(
    *,
    engine_version: str,
    kv_budget_bytes: int,
    bytes_needed_for_one_max_len_request: int,
    max_model_len: int,
    estimate_max_model_len: Callable[[int], int],
    pool_bytes_per_block: int = 0,
    total_memory_bytes: int | None = None,
    requested_bytes: int | None = None,
    free_memory_at_init_bytes: int | None = None,
    gpu_memory_utilization: float | None = None,
    device: str = "cuda:0",
) -> StartVerdict:
    """vLLM's own start-up checks in order, with its error text for that release.

    1. free memory at init below requested (when the three memory figures are given);
    2. no memory for the cache blocks (budget ≤ 0, after the null block from 0.29);
    3. one request of max_model_len does not fit; the text carries vLLM's estimate, which
       `estimate_max_model_len(check_memory_bytes)` must compute over the layers
       `vllm_max_len_scope` names (0.14–0.16: the whole model, all layers, not one PP stage).
    Memory that the engine spends after the KV cache is allocated (unbudgeted CUDA graphs,
    sampler warm-up) is not a check vLLM makes; see BudgetTerms.headroom_bytes.
    """
    try:
        parse_vllm_version(engine_version)
    except FieldError as e:
        return StartVerdict(False, "unsupported_version", e.detail)
    if (
        total_memory_bytes is not None
        and requested_bytes is not None
        and free_memory_at_init_bytes is not None
        and gpu_memory_utilization is not None
        and free_memory_at_init_bytes < requested_bytes
        and since(parse_vllm_version(engine_version), (0, 9, 1))
    ):
        return StartVerdict(
            False,
            "init_free_memory",
            init_free_memory_text(
                engine_version,
                free_bytes=free_memory_at_init_bytes,
                total_bytes=total_memory_bytes,
                gpu_memory_utilization=gpu_memory_utilization,
                requested_bytes=requested_bytes,
                device=device,
            ),
        )
    check = vllm_check_memory_bytes(engine_version, kv_budget_bytes, pool_bytes_per_block)
    if check <= 0:
        return StartVerdict(False, "no_kv_memory", no_memory_text(engine_version), check)
    needed = bytes_needed_for_one_max_len_request
    if needed > check:
        est = estimate_max_model_len(check)
        return StartVerdict(
            False,
            "max_model_len",
            max_len_text(
                engine_version,
                max_model_len=max_model_len,
                needed_bytes=needed,
                available_bytes=check,
                estimated_max_model_len=est,
            ),
            check,
            needed,
            est,
        )
    return StartVerdict(True, "starts", None, check, needed, None)
