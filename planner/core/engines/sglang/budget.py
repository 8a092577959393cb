"""SGLang's KV budget: free memory after load minus (1 − mem_fraction_static) of free before load.

Source: sglang 0.5.23 (PyPI wheel). `mem_cache/kv_cache_configurator.py`
`_profile_available_bytes`: rest = free_after_load − pre_model_load_free × (1 − mem_fraction_static)
− multimodal runtime reservation; `rest ≤ 0` raises "Loaded weights leave no GPU memory for the KV
cache…". Older releases had the same arithmetic in `ModelRunner.profile_max_num_token`.
Activations and CUDA graphs are not measured: they live in the (1 − mem_fraction_static) slack.
The automatic mem_fraction_static is `arg_groups/memory_hook.py` `_handle_gpu_memory_settings`:
reserved MiB = 512 + 1.5 × max(chunked_prefill_size, 2048) + tp·pp/8 × 1024 + 2 × decode
graph max_bs (+ 8 per prefill graph size), at least 10 GiB on GPUs over 60 GiB, and
mem_fraction_static = round((gpu MiB − reserved) / gpu MiB, 3).
"""

from __future__ import annotations

import math

from planner.core.budget.terms import BudgetTerms, StartVerdict, Term
from planner.core.engines.sglang.releases import (
    GRAPH_BS_RUNNING_CAP_SINCE,
    PREFILL_GRAPH_MIB_PER_SIZE,
    PREFILL_GRAPH_MLA_MIB,
    PREFILL_GRAPHS_DEFAULT_SINCE,
    VERIFIED,
    memory_tier,
    prefill_graph_sizes,
)
from planner.core.engines.versions import Version, since
from planner.core.errors import FieldError
from planner.core.units import GiB, MiB

# CUDA context (and NCCL communicators at TP/PP ≥ 2) resident before the weights load; the same
# figures vLLM's 0.19 logs show at its init snapshot on H100 (0.51 / 1.53 GiB).
_CONTEXT_TP1 = int(0.51 * GiB)
_CONTEXT_MULTI = int(1.53 * GiB)


def sglang_auto_mem_fraction_static(
    *,
    gpu_memory_bytes: int,
    chunked_prefill_size: int,
    cuda_graph_max_bs: int,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    prefill_graph_sizes: int = 0,
    cuda_graphs: bool = True,
    attn_dp_size: int = 1,
    mla_prefill_graphs: bool = False,
) -> tuple[float, str]:
    """SGLang's default when --mem-fraction-static is not given (non-disaggregated); DP
    attention pads the decode graphs, prefill graphs take 8 MiB a captured size or 1.5 GiB
    with MLA (reserve_for_graph_mb)."""
    gpu_mib = gpu_memory_bytes / MiB
    reserved = 512 + max(chunked_prefill_size, 2048) * 1.5
    reserved += tensor_parallel_size * pipeline_parallel_size / 8 * 1024
    if cuda_graphs:
        reserved += cuda_graph_max_bs * 2
        if mla_prefill_graphs:
            reserved += PREFILL_GRAPH_MLA_MIB
        else:
            reserved += prefill_graph_sizes * PREFILL_GRAPH_MIB_PER_SIZE
    if attn_dp_size > 1:
        reserved += cuda_graph_max_bs * attn_dp_size * 3
        if cuda_graph_max_bs > 300:
            reserved += cuda_graph_max_bs * attn_dp_size * 1.5
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    frac = round((gpu_mib - reserved) / gpu_mib, 3)
    return frac, f"auto: round(({gpu_mib:.0f} − {reserved:.0f} MiB reserved) / {gpu_mib:.0f}, 3)"


def sglang_default_fraction(
    *,
    gpu_memory_bytes: int,
    tensor_parallel_size: int,
    pipeline_parallel_size: int,
    chunked_prefill_size: int | None = None,
    cuda_graph_max_bs: int | None = None,
    max_running_requests: int | None = None,
    attn_dp_size: int = 1,
    version: Version = VERIFIED,
    is_mla: bool = False,
    max_total_tokens: int | None = None,
    prefill_graphs_allowed: bool = True,
) -> tuple[float, str]:
    """The automatic mem_fraction_static from the GPU's tiers (memory_hook.py): the chunked
    prefill and decode-graph batch default by GPU memory, an explicit --max-running-requests
    caps a default graph batch (from 0.5.22), and the prefill graphs CUDA captures by default
    up to the chunked prefill size (releases.prefill_graph_sizes)."""
    chunk, graph_bs = memory_tier(gpu_memory_bytes / MiB, tensor_parallel_size, version)
    if chunked_prefill_size is not None:
        chunk = chunked_prefill_size
    if cuda_graph_max_bs is not None:
        graph_bs = cuda_graph_max_bs
    elif max_running_requests is not None and since(version, GRAPH_BS_RUNNING_CAP_SINCE):
        graph_bs = min(graph_bs, max_running_requests)
    prefill_tokens = chunk
    if max_total_tokens is not None:
        prefill_tokens = min(prefill_tokens, max_total_tokens)
    # Opt-in with PP > 1, and in every setting before 0.5.10.
    # (and for the models cuda_graph_hook turns them off for: prefill_graphs_allowed).
    prefill_graphs = (
        prefill_graphs_allowed
        and pipeline_parallel_size == 1
        and since(version, PREFILL_GRAPHS_DEFAULT_SINCE)
    )
    return sglang_auto_mem_fraction_static(
        gpu_memory_bytes=gpu_memory_bytes,
        chunked_prefill_size=chunk,
        cuda_graph_max_bs=graph_bs,
        tensor_parallel_size=tensor_parallel_size,
        pipeline_parallel_size=pipeline_parallel_size,
        prefill_graph_sizes=prefill_graph_sizes(prefill_tokens) if prefill_graphs else 0,
        attn_dp_size=attn_dp_size,
        mla_prefill_graphs=is_mla and prefill_graphs,
    )


def sglang_budget(
    *,
    total_memory_bytes: int,
    weights_bytes_per_rank: int,
    mem_fraction_static: float,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    free_memory_before_load_bytes: int | None = None,
    multimodal_reservation_bytes: int = 0,
    engine_version: str = "0.5.23",
    reserve_bytes: int | None = None,
) -> BudgetTerms:
    """KV bytes one SGLang rank gets. `reserve_bytes` overrides the (1 − fraction) slack."""
    if not 0 < mem_fraction_static < 1:
        raise FieldError(
            "gpu_memory_utilization",
            "sglang.memory_fraction_range",
            mem_fraction_static=mem_fraction_static,
        )
    if total_memory_bytes < 1 or weights_bytes_per_rank < 0:
        raise FieldError("gpu", "sglang.memory_not_positive")
    multi = tensor_parallel_size > 1 or pipeline_parallel_size > 1
    if free_memory_before_load_bytes is None:
        context = _CONTEXT_MULTI if multi else _CONTEXT_TP1
        pre = total_memory_bytes - context
        nt = Term(
            context,
            f"CUDA context{' + NCCL' if multi else ''} before load: "
            f"{context / GiB:.2f} GiB (not in free-before-load)",
            "model",
        )
    else:
        pre = free_memory_before_load_bytes
        nt = Term(total_memory_bytes - pre, "given: total − free before load", "override")
    after_load = pre - weights_bytes_per_rank
    if reserve_bytes is None:
        # SGLang works in GiB floats: rest = free_after/2^30 − pre/2^30 × (1 − f), then
        # int(rest × 2^30) bytes; the slack is what that leaves out of free_after.
        rest = (after_load / GiB - pre / GiB * (1 - mem_fraction_static)) - (
            multimodal_reservation_bytes / GiB
        )
        slack = after_load - int(rest * GiB) - multimodal_reservation_bytes
        reserve = Term(
            slack + multimodal_reservation_bytes,
            f"free before load {pre / GiB:.2f} GiB × (1 − mem_fraction_static "
            f"{mem_fraction_static:g}) = {slack / GiB:.2f} GiB"
            + (
                f" + multimodal {multimodal_reservation_bytes / GiB:.2f} GiB"
                if multimodal_reservation_bytes
                else ""
            ),
            "engine_rule",
        )
    else:
        reserve = Term(reserve_bytes, f"given: {reserve_bytes / GiB:.2f} GiB", "override")
    budget = after_load - reserve.bytes
    inside = "inside the (1 − mem_fraction_static) slack; not measured by SGLang"
    return BudgetTerms(
        engine="sglang",
        engine_version=engine_version,
        rule="sglang:free_after_load−free_before_load×(1−mem_fraction_static)",
        total_memory_bytes=total_memory_bytes,
        memory_fraction=mem_fraction_static,
        requested_bytes=math.floor(pre * mem_fraction_static),  # static: weights + KV
        weights_bytes_per_rank=Term(weights_bytes_per_rank, "weights as loaded", "input"),
        activation_peak_bytes=Term(0, inside, "not_applicable"),
        non_torch_bytes=nt,
        cuda_graph_bytes=Term(0, inside, "not_applicable"),
        cuda_graph_subtracted=False,
        reserve_bytes=reserve,
        kv_budget_bytes=budget,
        # One "=" at the top level: the reserve's own arithmetic stays in its parentheses.
        derivation=(
            f"free before load {pre / GiB:.2f} GiB − weights {weights_bytes_per_rank / GiB:.2f} "
            f"GiB − reserve {reserve.bytes / GiB:.2f} GiB = {budget / GiB:.2f} GiB per GPU "
            f"(reserve: {reserve.derivation})"
        ),
        headroom_bytes=reserve.bytes,
    )


def sglang_start_check(
    *, budget: BudgetTerms, free_memory_before_load_bytes: int | None = None
) -> StartVerdict:
    """SGLang refuses when the loaded weights leave nothing under its static fraction."""
    if budget.kv_budget_bytes > 0:
        return StartVerdict(True, "starts", None, budget.kv_budget_bytes)
    pre = free_memory_before_load_bytes or (
        budget.total_memory_bytes - budget.non_torch_bytes.bytes
    )
    available = pre - budget.weights_bytes_per_rank.bytes
    minimum = 1 - available / pre
    suggested = math.ceil(minimum * 1000) / 1000
    return StartVerdict(
        False,
        "no_kv_memory",
        f"Loaded weights leave no GPU memory for the KV cache under "
        f"--mem-fraction-static={budget.memory_fraction}. Raise --mem-fraction-static above "
        f"{suggested:.3f} (minimum viable = 1 - available/pre = {minimum:.4f}). If using "
        "speculative decoding, draft weights are now counted.",
        budget.kv_budget_bytes,
    )
