"""The KV budget per GPU: given outright, or derived from the GPU as the engine derives it
(the engine's `derive_budget`: weights as loaded, activation peak, non-torch memory, CUDA
graphs), with every term in the answer."""

from __future__ import annotations

from planner.core import schema as s
from planner.core.budget.terms import BudgetTerms
from planner.core.errors import FieldError
from planner.core.inputs import Inputs
from planner.core.notes import Note, note
from planner.core.units import fmt_gib


def kv_budget(inp: Inputs) -> tuple[s.BudgetOut | None, BudgetTerms | None, list[Note]]:
    request, engine, gpu = inp.request, inp.engine, inp.gpu
    if request.kv_budget_bytes is not None:
        return _explicit(inp, request.kv_budget_bytes)
    if gpu is None:
        return None, None, []
    if inp.weights_bytes is None:
        raise FieldError(
            "weights_bytes",
            "input.budget_needs_weights",
        )
    util = request.gpu_memory_utilization
    if engine.memory_base == "free_after_load" and util is not None and util >= 1:
        # KVCacheManager.calculate_max_num_blocks asserts free_mem_fraction < 1.0.
        raise FieldError(
            "gpu_memory_utilization",
            "input.memory_fraction_below_1",
            label=engine.label,
            flag=engine.memory_fraction_flag,
            util=util,
            default=engine.default_memory_utilization(),
        )
    notes: list[Note] = []
    weights = _weights_per_rank(inp, inp.weights_bytes, notes)
    terms = engine.derive_budget(inp, weights)
    if terms.reserve_bytes.source == "engine_rule" and terms.activation_peak_bytes.source == (
        "not_applicable"
    ):
        notes.append(note("budget.reserve_default", reserve_gib=fmt_gib(terms.reserve_bytes.bytes)))
    named = (
        ("weights_bytes_per_rank", terms.weights_bytes_per_rank),
        ("activation_peak_bytes", terms.activation_peak_bytes),
        ("non_torch_bytes", terms.non_torch_bytes),
        ("cuda_graph_bytes", terms.cuda_graph_bytes),
        ("reserve_bytes", terms.reserve_bytes),
    )
    applicable = terms.activation_peak_bytes.source != "not_applicable"
    out = s.BudgetOut(
        source="gpu",
        gpu=gpu.id or gpu.name,
        gpu_memory_bytes=gpu.memory_bytes,
        gpu_memory_utilization=terms.memory_fraction,
        weights_bytes_per_rank=weights,
        reserve_bytes=terms.reserve_bytes.bytes,
        kv_budget_bytes=max(0, terms.kv_budget_bytes),
        derivation=terms.derivation,
        activation_peak_bytes=terms.activation_peak_bytes.bytes if applicable else None,
        non_torch_bytes=terms.non_torch_bytes.bytes if applicable else None,
        cuda_graph_bytes=terms.cuda_graph_bytes.bytes if applicable else None,
        cuda_graph_subtracted=terms.cuda_graph_subtracted if applicable else None,
        requested_bytes=terms.requested_bytes,
        engine_available_bytes=terms.kv_budget_bytes,
        terms=[
            s.BudgetTermOut(name=name, bytes=t.bytes, derivation=t.derivation, source=t.source)
            for name, t in named
        ],
    )
    return out, terms, notes


def _weights_per_rank(inp: Inputs, weights_bytes: int, notes: list[Note]) -> int:
    """Weights on one GPU: the checkpoint over TP × PP, or what the engine loads where it pads
    them (weights given in the request are taken as given); a separate draft's beside them."""
    weights = -(-weights_bytes // (inp.tp * inp.pp))
    params = inp.model.num_parameters
    if inp.request.weights_bytes is None and params:
        loaded = inp.engine.loaded_weights(inp, params)
        if loaded is not None:
            weights = loaded[0]
            notes.append(loaded[1])
    sp = inp.speculation
    if sp is not None and sp.method != "mtp" and sp.draft_layers and sp.draft_weights_bytes:
        # A separate draft (EAGLE head, EAGLE3, a draft model) is loaded beside the target,
        # sharded over the target's TP (vLLM's draft_tensor_parallel_size), on the last stage;
        # MTP layers are the target checkpoint's own.
        weights += -(-sp.draft_weights_bytes // inp.tp)
    return weights


def _explicit(inp: Inputs, budget_bytes: int) -> tuple[s.BudgetOut, BudgetTerms | None, list[Note]]:
    """A budget given outright is what the engine allocates, as vLLM does with
    --kv-cache-memory-bytes (from 0.10.2, PR #21489: `Worker.determine_available_memory` returns
    it and skips the memory profile, ignoring gpu_memory_utilization; v1/worker/gpu_worker.py).
    The KV tensors are allocated after the weights load, so on a named GPU the weights count:
    more than the GPU's memory on its own is refused (no engine can allocate it); with the
    weights over it, the engine runs out of memory."""
    gpu = inp.gpu
    derivation = f"kv_budget_bytes given: {fmt_gib(budget_bytes)}"
    weights: int | None = None
    notes: list[Note] = []
    if gpu is not None:
        if budget_bytes > gpu.memory_bytes:
            raise FieldError(
                "kv_budget_bytes",
                "budget.above_gpu",
                budget=fmt_gib(budget_bytes),
                gpu=gpu.id or gpu.name,
                memory=fmt_gib(gpu.memory_bytes),
            )
        if inp.weights_bytes is None:
            notes.append(note("budget.explicit_weights_unknown", gpu=gpu.id or gpu.name))
        else:
            weights = _weights_per_rank(inp, inp.weights_bytes, notes)
            used = weights + budget_bytes
            derivation += (
                f" + weights {fmt_gib(weights)} per GPU = {fmt_gib(used)} of the "
                f"{gpu.id or gpu.name}'s {fmt_gib(gpu.memory_bytes)}"
            )
            if used <= gpu.memory_bytes:
                notes.append(
                    note(
                        "budget.explicit_with_gpu",
                        budget=fmt_gib(budget_bytes),
                        weights=fmt_gib(weights),
                        gpu=gpu.id or gpu.name,
                        memory=fmt_gib(gpu.memory_bytes),
                        left=fmt_gib(gpu.memory_bytes - used),
                    )
                )
    out = s.BudgetOut(
        source="explicit",
        gpu=gpu.id or gpu.name if gpu else None,
        gpu_memory_bytes=gpu.memory_bytes if gpu else None,
        gpu_memory_utilization=None,
        weights_bytes_per_rank=weights,
        reserve_bytes=None,
        kv_budget_bytes=budget_bytes,
        derivation=derivation,
        terms=[],  # given, not its default: pydantic deep-copies a mutable default each time
    )
    return out, None, notes


def explicit_over_memory_text(budget: s.BudgetOut) -> str | None:
    """Why an engine given this budget outright runs out of memory at start-up: the weights
    and the KV tensors together exceed the GPU's memory. None when they fit or are unknown."""
    mem, weights = budget.gpu_memory_bytes, budget.weights_bytes_per_rank
    if budget.source != "explicit" or mem is None or weights is None:
        return None
    used = weights + budget.kv_budget_bytes
    if used <= mem:
        return None
    return (
        f"out of memory allocating the KV cache: the weights ({fmt_gib(weights)} per GPU) and "
        f"the KV budget given ({fmt_gib(budget.kv_budget_bytes)}) need {fmt_gib(used)}, more "
        f"than the {budget.gpu}'s {fmt_gib(mem)}; a budget given outright skips the memory "
        "profile (vLLM: --kv-cache-memory-bytes), so nothing shrinks it to fit"
    )


__all__ = ["explicit_over_memory_text", "kv_budget"]
