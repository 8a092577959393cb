"""vLLM's KV budget per release (0.9–0.33), term by term, and its start-up checks.

Sources (read in the released wheels; files named at the 0.19.0 layout unless noted):
- `vllm/v1/worker/gpu_worker.py` `Worker.determine_available_memory`: available =
  requested − (weights + torch peak increase + non-torch increase) [− CUDA-graph estimate].
  0.9.0 still charged torch's whole allocated peak plus every non-torch byte on the device
  (`total × util − peak_memory`, commit 0012cf691b7e). From 0.9.1 (PR #19312) the increase is
  measured against a snapshot taken in `init_device`; until 0.10.x that snapshot precedes
  `init_worker_distributed_environment`, so NCCL's set-up is charged; from 0.11.0 it follows it.
  From 0.27.0 `mem_utils.memory_profiling` charges consumed (free at init − free after profile)
  plus the transient torch peak: the same sum of weights, non-torch and activation peak.
- `requested = ceil(total × gpu_memory_utilization)` (`v1/worker/utils.request_memory`, 0.14+;
  `total × util` before), of the *torch-visible total* (`torch.cuda.mem_get_info()[1]`), not
  the nameplate. Start-up fails first if free memory at init is below it.
- CUDA graphs: `GPUModelRunner.profile_cudagraph_memory` (0.18.0, PR #30515) estimates them;
  the estimate is subtracted when `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS` is set, default
  "0" in 0.18–0.19 and "1" from 0.20.0 (`vllm/envs.py`). Not with `enforce_eager`.
- Default `gpu_memory_utilization`: 0.9, then 0.92 from 0.20.0 (`vllm/config/cache.py`).
- Activation peak: `profile_run` runs `_dummy_run(max_num_batched_tokens)` then
  `_dummy_sampler_run` over `min(max_num_seqs, max_num_batched_tokens)` rows of the full vocab
  (logits are gathered over TP, so this term does not shrink with TP) with top-k = vocab − 1 and
  top-p = 0.9. Up to 0.16 top-k/top-p sorted the logits in PyTorch (values plus int64 indices);
  0.17.0 added the Triton top-k/top-p (`v1/sample/ops/topk_topp_sampler.py`) for batches ≥ 8.
- Start-up checks and their texts: `v1/core/kv_cache_utils.py` `check_enough_kv_cache_memory`
  (`_check_enough_kv_cache_memory` from 0.14; `kv_cache_planning.py` in 0.33). 0.14–0.16 compare
  the *whole model's* need with the smallest worker's budget (global groups, vllm#32105); 0.9–0.13
  and 0.17+ compare each worker's own layers (0.17: `_project_kv_cache_groups_to_worker`). From
  0.29.0 one block of the pool (the null block) is held back before the check.

Fitted constants (bytes per logit element, fixed activation, non-torch increase, graph memory
per layer) come from the training half of the start-up logs in tests/fixtures/budget_logs.jsonl
(the split rule is in tests/core/test_budget_vllm.py); each derivation string says so.
"""

from __future__ import annotations

from planner.core.budget.facts import ModelFacts
from planner.core.budget.terms import BudgetTerms, Term
from planner.core.engines.vllm.rules import requested_bytes, vllm_rules
from planner.core.engines.vllm.terms import (
    _INIT_CONTEXT_MULTI,
    _INIT_CONTEXT_TP1,
    _gib,
    activation_peak_estimate,
    cuda_graph_estimate,
    non_torch_estimate,
)
from planner.core.errors import FieldError


def vllm_budget(
    *,
    engine_version: str,
    total_memory_bytes: int,
    weights_bytes_per_rank: int,
    model: ModelFacts,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    gpu_memory_utilization: float | None = None,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    last_pp_stage: bool = True,
    enforce_eager: bool = False,
    estimate_cudagraphs: bool | None = None,
    activation_peak_bytes: int | None = None,
    non_torch_bytes: int | None = None,
    cuda_graph_bytes: int | None = None,
    reserve_bytes: int | None = None,
    free_memory_at_init_bytes: int | None = None,
) -> BudgetTerms:
    """The "Available KV cache memory" vLLM computes on one rank, with every term.

    `total_memory_bytes` is the torch-visible total of one GPU. `weights_bytes_per_rank` is
    "Model loading took" on that rank. `last_pp_stage` selects the stage that runs the sampler
    (with PP the smallest budget, which sizes every worker's pool). `estimate_cudagraphs` is
    VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS (None: the release's default). Any of
    `activation_peak_bytes`, `non_torch_bytes`, `cuda_graph_bytes` replaces that term;
    `reserve_bytes` replaces their sum (what `reconcile` learns from a log).
    """
    rules = vllm_rules(engine_version)
    for name, value in (
        ("total_memory_bytes", total_memory_bytes),
        ("max_num_seqs", max_num_seqs),
        ("max_num_batched_tokens", max_num_batched_tokens),
        ("tensor_parallel_size", tensor_parallel_size),
        ("pipeline_parallel_size", pipeline_parallel_size),
    ):
        if value < 1:
            raise FieldError(name, "vllm.below_1", value=value)
    if weights_bytes_per_rank < 0:
        raise FieldError("weights_bytes", "vllm.negative")
    util = rules.default_utilization if gpu_memory_utilization is None else gpu_memory_utilization
    if not 0 < util <= 1:
        raise FieldError("gpu_memory_utilization", "vllm.memory_fraction_range", util=util)
    requested = requested_bytes(engine_version, total_memory_bytes, util)
    has_sampler = last_pp_stage or pipeline_parallel_size == 1

    weights = Term(
        weights_bytes_per_rank,
        f"weights as loaded on this rank: {_gib(weights_bytes_per_rank)}",
        "input",
    )
    act = (
        Term(activation_peak_bytes, f"given: {_gib(activation_peak_bytes)}", "override")
        if activation_peak_bytes is not None
        else activation_peak_estimate(
            model,
            rules=rules,
            tensor_parallel_size=tensor_parallel_size,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            has_sampler=has_sampler,
        )
    )
    nt = (
        Term(non_torch_bytes, f"given: {_gib(non_torch_bytes)}", "override")
        if non_torch_bytes is not None
        else non_torch_estimate(
            rules,
            tensor_parallel_size=tensor_parallel_size,
            pipeline_parallel_size=pipeline_parallel_size,
        )
    )
    if enforce_eager:
        graph = Term(0, "enforce_eager: no CUDA graphs are captured", "engine_rule")
    elif cuda_graph_bytes is not None:
        graph = Term(cuda_graph_bytes, f"given: {_gib(cuda_graph_bytes)}", "override")
    else:
        graph = cuda_graph_estimate(
            model,
            pipeline_parallel_size=pipeline_parallel_size,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
        )
    flag = (
        rules.graphs_subtracted_by_default if estimate_cudagraphs is None else estimate_cudagraphs
    )
    subtracted = rules.graphs_estimated and flag and not enforce_eager
    if not subtracted and not enforce_eager:
        why = (
            "estimated but not subtracted (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0)"
            if rules.graphs_estimated
            else "not budgeted by this release: captured after the KV cache, in the headroom"
        )
        graph = Term(graph.bytes, f"{graph.derivation}; {why}", graph.source)
    graph_applied = graph.bytes if subtracted else 0

    if reserve_bytes is not None:
        reserve = Term(
            reserve_bytes,
            f"given: {_gib(reserve_bytes)} (replaces activation, non-torch and CUDA-graph terms)",
            "override",
        )
    else:
        parts = act.bytes + nt.bytes + graph_applied
        reserve = Term(
            parts,
            f"activation {_gib(act.bytes)} + non-torch {_gib(nt.bytes)}"
            + (f" + CUDA graphs {_gib(graph_applied)}" if subtracted else ""),
        )
    budget = requested - weights.bytes - reserve.bytes

    if free_memory_at_init_bytes is None:
        multi = tensor_parallel_size > 1 or pipeline_parallel_size > 1
        context = _INIT_CONTEXT_MULTI if multi else _INIT_CONTEXT_TP1
        free_at_init = total_memory_bytes - context
    else:
        free_at_init = free_memory_at_init_bytes
    headroom = free_at_init - requested

    how = (
        f"{'⌈' if rules.requested_ceil else ''}{_gib(total_memory_bytes)} × "
        f"gpu_memory_utilization {util:g}{'⌉' if rules.requested_ceil else ''} = "
        f"{_gib(requested)} − weights {_gib(weights.bytes)} − ({reserve.derivation}) = "
        f"{_gib(budget)} per GPU (vLLM {engine_version}, {rules.formula} rule)"
    )
    return BudgetTerms(
        engine="vllm",
        engine_version=engine_version,
        rule=f"vllm≥{'.'.join(map(str, rules.since))}:{rules.formula}",
        total_memory_bytes=total_memory_bytes,
        memory_fraction=util,
        requested_bytes=requested,
        weights_bytes_per_rank=weights,
        activation_peak_bytes=act,
        non_torch_bytes=nt,
        cuda_graph_bytes=graph,
        cuda_graph_subtracted=subtracted,
        reserve_bytes=reserve,
        kv_budget_bytes=budget,
        derivation=how,
        headroom_bytes=headroom,
    )
