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
        out = s.BudgetOut(
            source="explicit",
            gpu=gpu.id or gpu.name if gpu else None,
            gpu_memory_bytes=gpu.memory_bytes if gpu else None,
            gpu_memory_utilization=None,
            weights_bytes_per_rank=None,
            reserve_bytes=None,
            kv_budget_bytes=request.kv_budget_bytes,
            derivation=f"kv_budget_bytes given: {fmt_gib(request.kv_budget_bytes)}",
        )
        notes: list[Note] = []
        if gpu is not None and request.kv_budget_bytes > gpu.memory_bytes:
            notes.append(
                note(
                    "budget.exceeds_gpu",
                    budget=fmt_gib(request.kv_budget_bytes),
                    gpu=gpu.name,
                    memory=fmt_gib(gpu.memory_bytes),
                )
            )
        return out, None, notes
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
    weights = -(-inp.weights_bytes // (inp.tp * inp.pp))
    sp = inp.speculation
    if sp is not None and sp.method != "mtp" and sp.draft_layers and sp.draft_weights_bytes:
        # A separate draft (EAGLE head, EAGLE3, a draft model) is loaded beside the target,
        # sharded over the target's TP (vLLM's draft_tensor_parallel_size), on the last stage;
        # MTP layers are the target checkpoint's own.
        weights += -(-sp.draft_weights_bytes // inp.tp)
    terms = engine.derive_budget(inp, weights)
    notes = []
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


__all__ = ["kv_budget"]
