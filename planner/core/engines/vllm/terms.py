"""The non-KV terms of vLLM's budget estimated from the model's shape: the profile run's
activation peak, non-torch memory, CUDA graphs, and MXFP4 expert weights as vLLM pads them.
Fitted constants say so in their derivation (tests/fixtures/budget_logs.jsonl)."""

from __future__ import annotations

from typing import Literal

from planner.core.budget.facts import ModelFacts, model_facts
from planner.core.budget.terms import Term
from planner.core.engines.reads import PlanInputs
from planner.core.engines.vllm.rules import VllmRules
from planner.core.errors import FieldError
from planner.core.notes import Note, note
from planner.core.units import GiB, MiB

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
        raise FieldError("model", "vllm.mxfp4_needs_moe")
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


def vllm_loaded_weights(inp: PlanInputs, num_parameters: int) -> tuple[int, Note] | None:
    """gpt-oss's MXFP4 experts as vLLM holds them on one rank (None for other checkpoints).

    Hopper and Ampere have no native FP4, so vLLM runs the experts through Marlin ("Your GPU does
    not have native support for FP4 computation ... leveraging the Marlin kernel") with its
    padding; Blackwell (compute capability 10.x) takes FlashInfer TRT-LLM's. Evidence:
    gpt-oss-120b on one H100, "Model loading took 65.9651 GiB" (vLLM 0.10.1, vllm#23278), where
    the checkpoint files hold 60.8 GiB. With PP the padded total is split over the stages."""
    if inp.shape.quant_method != "mxfp4":
        return None
    facts = model_facts(inp.model_dtype, inp.model.config, inp.shape)
    if not facts.is_moe:
        return None
    cc = inp.gpu.compute_capability if inp.gpu is not None else None
    backend: Mxfp4Backend = "flashinfer_trtllm" if cc is not None and cc >= 100 else "marlin"
    term = vllm_mxfp4_weights_bytes_per_rank(
        facts, num_parameters=num_parameters, tensor_parallel_size=inp.tp, backend=backend
    )
    per_rank = -(-term.bytes // inp.pp)
    return per_rank, note("budget.mxfp4_loaded", weights=_gib(per_rank), how=term.derivation)
