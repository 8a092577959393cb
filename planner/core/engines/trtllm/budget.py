"""TensorRT-LLM's KV budget: free_gpu_memory_fraction of the memory left after load and profile.

Sources: PyTorch backend `tensorrt_llm/_torch/pyexecutor/_util.py` `KvCacheCreator._cal_max_memory`:
(total − peak memory of the estimation run + KV bytes that run allocated) × fraction, i.e. the
fraction applies to what weights, the measured activation peak and non-torch memory leave;
C++ `BaseKVCacheManager::calculateFreeMemBytes`: (free + memory pool free) × fraction. Default
`KvCacheConfig.free_gpu_memory_fraction = 0.9`; `max_gpu_total_bytes` / `max_tokens` cap it
(the smaller wins). Fractions of 1.0 and above are refused (`calculate_max_num_blocks`).
"""

from __future__ import annotations

import math

from planner.core.budget.terms import BudgetTerms, Term
from planner.core.errors import FieldError
from planner.core.units import GiB

_CONTEXT_TP1 = int(0.51 * GiB)
_CONTEXT_MULTI = int(1.53 * GiB)


def trtllm_budget(
    *,
    total_memory_bytes: int,
    weights_bytes_per_rank: int,
    activation_peak_bytes: int,
    free_gpu_memory_fraction: float = 0.9,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    non_torch_bytes: int | None = None,
    max_gpu_total_bytes: int | None = None,
    engine_version: str = "1.x",
    reserve_bytes: int | None = None,
) -> BudgetTerms:
    """KV bytes one TensorRT-LLM rank gets. TensorRT-LLM measures the activation peak at start-up;
    pass it (e.g. from a reconciled log) — no shape model of its estimation run is claimed here.
    `reserve_bytes` replaces activation + non-torch."""
    f = free_gpu_memory_fraction
    if not 0 < f < 1:
        raise FieldError("gpu_memory_utilization", "trtllm.memory_fraction_range", f=f)
    if total_memory_bytes < 1 or weights_bytes_per_rank < 0 or activation_peak_bytes < 0:
        raise FieldError("gpu", "trtllm.memory_not_positive")
    multi = tensor_parallel_size > 1 or pipeline_parallel_size > 1
    if non_torch_bytes is None:
        ctx = _CONTEXT_MULTI if multi else _CONTEXT_TP1
        nt = Term(ctx, f"CUDA context{' + NCCL' if multi else ''}: {ctx / GiB:.2f} GiB")
    else:
        nt = Term(non_torch_bytes, f"given: {non_torch_bytes / GiB:.2f} GiB", "override")
    act = Term(activation_peak_bytes, f"given: {activation_peak_bytes / GiB:.2f} GiB", "override")
    if reserve_bytes is None:
        reserve = Term(
            act.bytes + nt.bytes,
            f"activation {act.bytes / GiB:.2f} GiB + non-torch {nt.bytes / GiB:.2f} GiB",
        )
    else:
        reserve = Term(reserve_bytes, f"given: {reserve_bytes / GiB:.2f} GiB", "override")
    left = total_memory_bytes - weights_bytes_per_rank - reserve.bytes
    budget = math.floor(left * f)
    how = (
        f"({total_memory_bytes / GiB:.2f} GiB − weights {weights_bytes_per_rank / GiB:.2f} GiB − "
        f"{reserve.derivation}) × free_gpu_memory_fraction {f:g} = {budget / GiB:.2f} GiB"
    )
    if max_gpu_total_bytes is not None and max_gpu_total_bytes < budget:
        budget = max_gpu_total_bytes
        how += f", capped by max_gpu_total_bytes to {budget / GiB:.2f} GiB"
    none = "not subtracted: TensorRT-LLM's fraction leaves the rest as headroom"
    return BudgetTerms(
        engine="trtllm",
        engine_version=engine_version,
        rule="trtllm:(total−weights−activation−non_torch)×free_gpu_memory_fraction",
        total_memory_bytes=total_memory_bytes,
        memory_fraction=f,
        requested_bytes=weights_bytes_per_rank + reserve.bytes + budget,
        weights_bytes_per_rank=Term(weights_bytes_per_rank, "weights as loaded", "input"),
        activation_peak_bytes=act,
        non_torch_bytes=nt,
        cuda_graph_bytes=Term(0, none, "not_applicable"),
        cuda_graph_subtracted=False,
        reserve_bytes=reserve,
        kv_budget_bytes=budget,
        derivation=how + " per GPU",
        headroom_bytes=left - budget,
    )
