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

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from planner.core.budget.facts import ModelFacts
from planner.core.budget.terms import BudgetTerms, StartVerdict, Term
from planner.core.errors import FieldError
from planner.core.units import GiB, MiB

Version = tuple[int, int, int]
OLDEST: Version = (0, 9, 0)
NEWEST_MINOR = 33

_VERSION_RE = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_vllm_version(text: str) -> Version:
    """'0.19.0', '0.29.1rc1.dev17+gd2d…', 'v0.15.2rc1' → (major, minor, patch); refuses others."""
    m = _VERSION_RE.match(text or "")
    if not m:
        raise FieldError(
            "engine_version", f"{text!r} is not a vLLM version; give one such as '0.19.0'"
        )
    v = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    if v < OLDEST or v[0] != 0 or v[1] > NEWEST_MINOR:
        raise FieldError(
            "engine_version",
            f"vLLM {text} is outside the releases whose memory profiling is modelled "
            f"(0.9.0–0.{NEWEST_MINOR}.x)",
        )
    return v


Scope = Literal["stage", "whole_model"]
Formula = Literal["peak_all", "increase_nccl_charged", "increase", "consumed_transient"]


@dataclass(frozen=True, slots=True)
class VllmRules:
    """What one range of releases does; `since` is the first release the row applies to."""

    since: Version
    formula: Formula
    requested_ceil: bool
    sampler_extra_bytes_per_logit: int  # on top of the compute dtype's own logits
    sampler_note: str
    non_torch_tp1_bytes: int
    non_torch_tp_multi_bytes: int
    non_torch_note: str
    graphs_estimated: bool
    graphs_subtracted_by_default: bool
    default_utilization: float
    max_len_scope: Scope
    null_block_in_check: bool


# Logit bytes: the dtype's logits + fp32 logits + fp32 probs + fp32 exponential noise = d + 12
# in the Triton path; the sort path adds sorted values, int64 indices, a softmax and a cumsum
# (fitted: d + 35, training logs vllm011x-llama31-8b and vllm0101dev-gemma3-4b).
_SORT_EXTRA, _TRITON_EXTRA = 35, 12
_SORT_NOTE = "PyTorch sort top-k/top-p (≤0.16): fitted 35 B + dtype per logit"
_TRITON_NOTE = "Triton top-k/top-p (≥0.17): fp32 logits, probs, noise = 12 B + dtype per logit"
# Non-torch increase during the profile (fitted on training logs; see each note).
_NT_010 = (
    int(0.07 * GiB),
    int(1.6 * GiB),
    "0.9.1–0.10.x: 0.07 GiB at TP1 (B200 log); at TP≥2 NCCL set-up falls after the snapshot "
    "and is charged: ~1.6 GiB, not checked against a log",
)
_NT_011 = (
    int(0.13 * GiB),
    int(0.55 * GiB),
    "0.11–0.16: 0.13 GiB at TP1 (fitted), 0.55 GiB at TP≥2 (observed in 0.11–0.14 logs)",
)
_NT_017 = (
    int(0.25 * GiB),
    int(2.07 * GiB),
    "0.17+: 0.25 GiB at TP1, 2.07 GiB at TP≥2 (fitted on 0.19 logs: NCCL/custom all-reduce "
    "buffers created in the first forward)",
)


def _row(
    since: Version,
    formula: Formula,
    nt: tuple[int, int, str],
    *,
    sort: bool = False,
    ceil_: bool = True,
    est: bool = True,
    sub: bool = True,
    util: float = 0.92,
    scope: Scope = "stage",
    null: bool = False,
) -> VllmRules:
    return VllmRules(
        since=since,
        formula=formula,
        requested_ceil=ceil_,
        sampler_extra_bytes_per_logit=_SORT_EXTRA if sort else _TRITON_EXTRA,
        sampler_note=_SORT_NOTE if sort else _TRITON_NOTE,
        non_torch_tp1_bytes=nt[0],
        non_torch_tp_multi_bytes=nt[1],
        non_torch_note=nt[2],
        graphs_estimated=est,
        graphs_subtracted_by_default=sub,
        default_utilization=util,
        max_len_scope=scope,
        null_block_in_check=null,
    )


# One row per range of releases in which every rule held; a row applies up to the next one.
_RULES: tuple[VllmRules, ...] = (
    _row((0, 9, 0), "peak_all", _NT_010, sort=True, ceil_=False, est=False, sub=False, util=0.9),
    _row(
        (0, 9, 1),
        "increase_nccl_charged",
        _NT_010,
        sort=True,
        ceil_=False,
        est=False,
        sub=False,
        util=0.9,
    ),
    _row((0, 11, 0), "increase", _NT_011, sort=True, ceil_=False, est=False, sub=False, util=0.9),
    _row(
        (0, 14, 0),
        "increase",
        _NT_011,
        sort=True,
        est=False,
        sub=False,
        util=0.9,
        scope="whole_model",
    ),
    _row((0, 17, 0), "increase", _NT_017, est=False, sub=False, util=0.9),
    _row((0, 18, 0), "increase", _NT_017, sub=False, util=0.9),
    _row((0, 20, 0), "increase", _NT_017),
    _row((0, 27, 0), "consumed_transient", _NT_017),
    _row((0, 29, 0), "consumed_transient", _NT_017, null=True),
)


def vllm_rules(engine_version: str) -> VllmRules:
    v = parse_vllm_version(engine_version)
    return [r for r in _RULES if r.since <= v][-1]


def vllm_default_memory_utilization(engine_version: str) -> float:
    return vllm_rules(engine_version).default_utilization


def vllm_max_len_scope(engine_version: str) -> Scope:
    """Which layers vLLM's one-request check and max-length estimate count under PP.

    "whole_model" (0.14–0.16): every layer of the model against the smallest worker's budget.
    "stage": that worker's own layers (the binding worker is the one that fails first).
    """
    return vllm_rules(engine_version).max_len_scope


# ---------------------------------------------------------------------------------------------
# The terms
# ---------------------------------------------------------------------------------------------

# Fixed part of the profile's torch peak besides the batch and the sampler (rand_like copy of
# the hidden states, compile/attention metadata): fitted 0.12 GiB on the 0.19 training logs.
_ACT_FIXED = int(0.12 * GiB)
# Graph pool per layer per rank, scaled by the number of captured graphs against the 0.19 H100
# default (51 piecewise + 51 full = 102): fitted 20 MiB/layer on the 0.19 training logs.
_GRAPH_PER_LAYER = 20 * MiB
_GRAPH_REFERENCE_COUNT = 102
# CUDA context (+ NCCL communicators with TP/PP ≥ 2) already on the device at the init
# snapshot: 0.51 GiB at TP1 and 1.43–2.07 GiB with TP/PP on H100 in the 0.19 logs.
_INIT_CONTEXT_TP1 = int(0.51 * GiB)
_INIT_CONTEXT_MULTI = int(1.53 * GiB)


def _capture_sizes(max_num_seqs: int, max_num_batched_tokens: int) -> list[int]:
    """vLLM's default capture list: 1, 2, 4, 8..248 step 8, 256.. step 16, up to 2×seqs ≤ 512."""
    top = min(512, 2 * max_num_seqs, max_num_batched_tokens)
    sizes = [1, 2, 4, *range(8, 256, 8), *range(256, 513, 16)]
    return [s for s in sizes if s <= top]


def _gib(n: int) -> str:
    return f"{n / GiB:.2f} GiB"


def activation_peak_estimate(
    facts: ModelFacts,
    *,
    rules: VllmRules,
    tensor_parallel_size: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    has_sampler: bool,
) -> Term:
    """Torch peak of the profile run: max(forward batch, sampler) + hidden states + fixed part."""
    d = facts.dtype_bytes
    tp = tensor_parallel_size
    t = max_num_batched_tokens
    h = facts.hidden_size
    if facts.is_moe:
        # Fused-MoE workspaces for M tokens: [M, top_k, 2N], [M·top_k, N], [M, top_k, H]
        # (`fused_moe.py` intermediate caches) plus fp32 router logits, besides the residuals.
        n = -(-facts.expert_intermediate_size // tp)
        k = facts.num_experts_per_tok
        per_token = d * (4 * h + k * (3 * n + h)) + 4 * facts.num_experts
        how_fwd = f"MoE {t} tok × (4H + top{k}·(3·{n} + H))·{d} B"
    else:
        i = -(-facts.intermediate_size // tp)
        per_token = d * (4 * h + 3 * i)
        how_fwd = f"{t} tok × (4H + 3·{i})·{d} B"
    forward = t * per_token
    rows = min(max_num_seqs, max_num_batched_tokens)
    per_logit = d + rules.sampler_extra_bytes_per_logit
    sampler = rows * facts.vocab_size * per_logit if has_sampler else 0
    hidden = t * h * d
    total = max(forward, sampler) + hidden + _ACT_FIXED
    which = "sampler" if sampler >= forward else "forward"
    how_s = (
        f"sampler {rows} rows × vocab {facts.vocab_size} × {per_logit} B = {_gib(sampler)}"
        if has_sampler
        else "no sampler on this PP stage"
    )
    return Term(
        total,
        f"max(forward {how_fwd} = {_gib(forward)}, {how_s}) [{which}] + hidden states "
        f"{_gib(hidden)} + fixed {_gib(_ACT_FIXED)} = {_gib(total)}; {rules.sampler_note}",
    )


def non_torch_estimate(
    rules: VllmRules, *, tensor_parallel_size: int, pipeline_parallel_size: int
) -> Term:
    multi = tensor_parallel_size > 1
    b = rules.non_torch_tp_multi_bytes if multi else rules.non_torch_tp1_bytes
    extra = 0
    how = f"{_gib(b)} ({'TP≥2' if multi else 'TP1'}); {rules.non_torch_note}"
    if rules.formula == "peak_all":
        # 0.9.0 charges every non-torch byte on the device, the CUDA context included.
        extra = _INIT_CONTEXT_MULTI if (multi or pipeline_parallel_size > 1) else _INIT_CONTEXT_TP1
        how += f"; 0.9.0 also charges the CUDA context/NCCL already resident: +{_gib(extra)}"
    return Term(b + extra, how)


def cuda_graph_estimate(
    facts: ModelFacts,
    *,
    pipeline_parallel_size: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
) -> Term:
    sizes = _capture_sizes(max_num_seqs, max_num_batched_tokens)
    full = [s for s in sizes if s <= max_num_seqs]
    layers = -(-facts.num_hidden_layers // pipeline_parallel_size)
    count = len(sizes) + len(full)
    b = layers * _GRAPH_PER_LAYER * count // _GRAPH_REFERENCE_COUNT
    return Term(
        b,
        f"{layers} layers × 20 MiB × ({len(sizes)} piecewise + {len(full)} full graphs)/102 "
        f"= {_gib(b)} (fitted on 0.19 estimates)",
    )


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
            raise FieldError(name, f"must be ≥ 1 (got {value})")
    if weights_bytes_per_rank < 0:
        raise FieldError("weights_bytes", "must be ≥ 0")
    util = rules.default_utilization if gpu_memory_utilization is None else gpu_memory_utilization
    if not 0 < util <= 1:
        raise FieldError("gpu_memory_utilization", f"must be in (0, 1] (got {util:g})")
    raw = total_memory_bytes * util
    requested = math.ceil(raw) if rules.requested_ceil else int(raw)
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


Mxfp4Backend = Literal["marlin", "flashinfer_trtllm"]


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def vllm_mxfp4_weights_bytes_per_rank(
    facts: ModelFacts,
    *,
    num_parameters: int,
    tensor_parallel_size: int = 1,
    backend: Mxfp4Backend = "marlin",
) -> Term:
    """Weights one rank holds for an MXFP4-expert checkpoint (gpt-oss), padded as vLLM loads it.

    `Mxfp4MoEMethod.create_weights` (`quantization/mxfp4.py`; 0.19:
    `fused_moe/oracle/mxfp4.mxfp4_round_up_hidden_size_and_intermediate_size`) pads each expert:
    Marlin (GPUs without native FP4: Ampere, Hopper) rounds the per-rank intermediate size to 128
    and the hidden size to 256; FlashInfer TRT-LLM (Blackwell) both to 256. The Triton path
    (0.14+ on Hopper when triton_kernels is installed) pads the intermediate size to 64 and then
    swizzles into its own layout, which is not modelled: its one logged load (64.38 GiB for
    gpt-oss-120b) is 1.5 GiB under the Marlin figure, so Marlin is the conservative choice there.
    Per expert:
    w13 [2I, H/2] uint8 + scales [2I, H/32] + bf16 bias [2I]; w2 [H, I/2] + scales [H, I/32] +
    bf16 bias [H]. Everything else (attention, router, embeddings) stays in the compute dtype,
    sharded over TP.
    """
    e, layers = facts.num_experts, facts.num_hidden_layers
    h, i_full = facts.hidden_size, facts.expert_intermediate_size
    if not facts.is_moe or i_full <= 0:
        raise FieldError("model", "MXFP4 expert weights need an MoE config (experts, top-k)")
    tp = tensor_parallel_size
    i = -(-i_full // tp)
    if backend == "marlin":
        i, hp = _round_up(i, 128), _round_up(h, 256)
    else:
        i, hp = _round_up(i, 256), _round_up(h, 256)
    per_expert = 2 * i * (hp // 2 + hp // 32 + 2) + hp * (i // 2 + i // 32 + 2)
    expert_params = e * layers * (3 * i_full * h + 2 * i_full + h)
    rest = max(0, num_parameters - expert_params) * facts.dtype_bytes
    total = e * layers * per_expert + -(-rest // tp)
    return Term(
        total,
        f"{e} experts × {layers} layers × {per_expert} B (MXFP4, {backend} padding I→{i}, "
        f"H→{hp}) + non-expert {_gib(rest)}/{tp} = {_gib(total)} per rank",
    )


# ---------------------------------------------------------------------------------------------
# Start-up checks
# ---------------------------------------------------------------------------------------------

_DOCS = " See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."


def _r2(n: int) -> str:
    """`format_gib` / `GiB` in vLLM: str(round(bytes / GiB, 2)), e.g. '24.0', '-1.44'."""
    return f"{round(n / GiB, 2)}"


def no_memory_text(engine_version: str) -> str:
    v = parse_vllm_version(engine_version)
    head = "No available memory for the cache blocks. "
    if v >= (0, 22, 0):
        return (
            head + "Try increasing `gpu_memory_utilization` when initializing the engine "
            "(this flag also controls CPU memory reservation on the CPU backend, despite its "
            "name)." + _DOCS
        )
    text = head + "Try increasing `gpu_memory_utilization` when initializing the engine."
    return text + _DOCS if v >= (0, 13, 0) else text


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
    if v >= (0, 14, 0):
        est = (
            f"Based on the available memory, the estimated maximum model length is {w}. "
            if w > 0
            else ""
        )
        model = "model's" if v >= (0, 22, 0) else "models's"
        tail = (
            "Try increasing `gpu_memory_utilization` (which also controls CPU memory on the "
            "CPU backend) or decreasing `max_model_len` when initializing the engine."
            if v >= (0, 22, 0)
            else "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
            "initializing the engine."
        )
        return (
            f"To serve at least one request with the {model} max seq len ({max_model_len}), "
            f"({_r2(needed_bytes)} GiB KV cache is needed, which is larger than the available "
            f"KV cache memory ({_r2(available_bytes)} GiB). {est}{tail}{_DOCS}"
        )
    if v == (0, 9, 0):
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
    return text + _DOCS if v >= (0, 13, 0) else text


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
    where = f"Free memory on device {device} " if v >= (0, 14, 0) else "Free memory on device "
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
        and parse_vllm_version(engine_version) >= (0, 9, 1)
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
