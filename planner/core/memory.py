"""The KV budget per GPU: given outright, or derived from the GPU as the engine derives it."""

from __future__ import annotations

import math

from planner.core import schema as s
from planner.core.errors import FieldError
from planner.core.inputs import Inputs
from planner.core.notes import Note, note
from planner.core.units import fmt_gib

_FRACTION_LABEL = {
    "total": "gpu_memory_utilization",
    "free_before_load": "mem_fraction_static",
    "free_after_load": "free_gpu_memory_fraction",
    "none": "fraction",
}


def kv_budget(inp: Inputs) -> tuple[s.BudgetOut | None, list[Note]]:
    request, engine, gpu = inp.request, inp.engine, inp.gpu
    if request.kv_budget_bytes is not None:
        return (
            s.BudgetOut(
                source="explicit",
                gpu=gpu.id or gpu.name if gpu else None,
                gpu_memory_bytes=gpu.memory_bytes if gpu else None,
                gpu_memory_utilization=None,
                weights_bytes_per_rank=None,
                reserve_bytes=None,
                kv_budget_bytes=request.kv_budget_bytes,
                derivation=f"kv_budget_bytes given: {fmt_gib(request.kv_budget_bytes)}",
            ),
            [],
        )
    if gpu is None:
        return None, []
    if inp.weights_bytes is None:
        raise FieldError(
            "weights_bytes",
            "cannot derive a KV budget from the GPU without the weight size; set weights_bytes "
            "(0 for KV only) or kv_budget_bytes",
        )
    util = request.gpu_memory_utilization or engine.default_memory_utilization()
    if engine.memory_base == "free_after_load" and util >= 1:
        # KVCacheManager.calculate_max_num_blocks asserts free_mem_fraction < 1.0.
        raise FieldError(
            "gpu_memory_utilization",
            f"{engine.label}'s {engine.memory_fraction_flag} must be below 1.0 (got {util:g}); "
            f"its default is {engine.default_memory_utilization():g}",
        )
    weights = -(-inp.weights_bytes // (inp.tp * inp.pp))
    reserve = (
        request.reserve_bytes if request.reserve_bytes is not None else engine.default_reserve_bytes
    )
    mem = gpu.memory_bytes
    label = _FRACTION_LABEL[engine.memory_base]
    if engine.memory_base == "free_after_load":
        budget = math.floor((mem - weights - reserve) * util)
        how = (
            f"({fmt_gib(mem)} − weights {fmt_gib(weights)} − reserve {fmt_gib(reserve)}) × "
            f"{label} {util:g}"
        )
    else:
        budget = math.ceil(mem * util) - weights - reserve
        how = (
            f"{fmt_gib(mem)} × {label} {util:g} − weights {fmt_gib(weights)} − reserve "
            f"{fmt_gib(reserve)}"
        )
    notes = []
    if request.reserve_bytes is None:
        notes.append(note("budget.reserve_default", reserve_gib=fmt_gib(reserve)))
    budget = max(0, budget)
    return (
        s.BudgetOut(
            source="gpu",
            gpu=gpu.id or gpu.name,
            gpu_memory_bytes=mem,
            gpu_memory_utilization=util,
            weights_bytes_per_rank=weights,
            reserve_bytes=reserve,
            kv_budget_bytes=budget,
            derivation=f"{how} = {fmt_gib(budget)} per GPU",
        ),
        notes,
    )


__all__ = ["kv_budget"]
