"""The expected decode step and TPOT beside the floor (pure).

The floor (`bounds.decode_step_seconds`) is physics: the bytes a step must read over the
datasheet bandwidth, which no run can beat. The expected step adds what a real step also
spends, each term a quantity over a rate:

    memory   = weights read / (B·η_bw) + KV read / (B·η_kv)
    compute  = matmul FLOPs / (F·η_mm) + attention FLOPs / (F·η_mm)
    step     = max(memory, compute)
             + all-reduce: 2 per layer × (α + 2(tp−1)·ℓ + 2(tp−1)/tp · M / (L·η_link))
             + pipeline hand-offs: (pp−1) × (α + M / (L·η_link))
             + layers × c_layer + MoE layers × c_moe + c_step + requests × c_req

B, F, L, ℓ are the GPU's datasheet bandwidth, dense peak at the weights' width, link bandwidth
and hop latency (catalog); η_bw, η_kv, η_mm, η_link, α, c_layer, c_moe, c_step, c_req are fitted
(`planner.core.step_constants`, written by bench/fit_step_model.py) or measured by a stored
calibration; c_req is the engine's (TensorRT-LLM has its own). M is one all-reduce's message:
batch tokens × hidden size × 2 bytes (bf16 activations). With η ≤ 1 the memory side alone is
at least the floor; the step is clamped to the floor anyway, so the estimate is never below it.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.core.calibration import CalibrationLike
from planner.core.expected_schema import ExpectedOut, StepTermOut
from planner.core.hardware import Gpu
from planner.core.inputs import Inputs
from planner.core.notes import Note, note
from planner.core.speculative_schema import SpeculativeBoundsOut
from planner.core.step_constants import (
    DEFAULT_LINK_BANDWIDTH_BYTES_PER_S,
    DEFAULT_LINK_LATENCY_SECONDS,
    FITTED,
    StepConstants,
)

ACTIVATION_BYTES = 2  # decode's hidden states travel in bf16/fp16 between ranks


@dataclass(frozen=True, slots=True)
class StepWork:
    """What one decode step does on one rank's path through the model (every stage)."""

    batch_tokens: int  # tokens this step computes (speculative: requests × (k + 1))
    requests: int  # requests running (each gets scheduled and sampled every step)
    weights_bytes: float  # weights streamed (MoE: the experts the batch routes to), per rank
    kv_bytes: float  # KV read, per rank, summed over the stages
    matmul_flops: float  # 2 × active parameters × batch tokens / tp
    attention_flops: float  # QK and AV over the KV read
    layers: int  # decoder layers a token passes (all stages)
    moe_layers: int
    hidden_size: int
    tp: int
    pp: int


@dataclass(frozen=True, slots=True)
class StepRates:
    """The datasheet figures and constants the terms divide by, and which were measured."""

    weights_bytes_per_s: float  # B·η_bw (calibration: its measured copy rate)
    kv_bytes_per_s: float  # B·η_bw (calibration: its measured decode-attention rate)
    flops_per_s: float | None  # F·η_mm (calibration: its measured matmul rate); None: unknown
    link_bytes_per_s: float  # L·η_link
    hop_latency_seconds: float  # ℓ
    constants: StepConstants
    measured: frozenset[str] = frozenset()


def all_reduce_seconds(message_bytes: float, tp: int, rates: StepRates) -> float:
    """One ring all-reduce of `message_bytes` over tp ranks: a fixed cost, 2(tp−1) hops, and
    each rank sending 2(tp−1)/tp of the message over its link."""
    if tp <= 1:
        return 0.0
    hops = 2 * (tp - 1)
    wire = 2.0 * (tp - 1) / tp * message_bytes / rates.link_bytes_per_s
    return rates.constants.all_reduce_base_seconds + hops * rates.hop_latency_seconds + wire


def step_terms(work: StepWork, rates: StepRates) -> list[StepTermOut]:
    """Every term of the expected step; `counted` marks those the step adds up."""
    c = rates.constants
    message = work.batch_tokens * work.hidden_size * ACTIVATION_BYTES
    weights = work.weights_bytes / rates.weights_bytes_per_s
    kv = work.kv_bytes / rates.kv_bytes_per_s
    flops = rates.flops_per_s
    matmul = work.matmul_flops / flops if flops else 0.0
    attention = work.attention_flops / flops if flops else 0.0
    compute_bound = matmul + attention > weights + kv
    one_ar = all_reduce_seconds(message, work.tp, rates)
    handoff = (
        (work.pp - 1) * (c.all_reduce_base_seconds + message / rates.link_bytes_per_s)
        if work.pp > 1
        else 0.0
    )
    m = rates.measured

    def term(
        code: str, seconds: float, group: str, counted: bool, **params: float | int
    ) -> StepTermOut:
        return StepTermOut(
            code=code,
            seconds=seconds,
            group=group,
            counted=counted,
            measured=code in m,
            params=dict(params),
        )

    return [
        term("weights_read", weights, "memory", not compute_bound,
             bytes=round(work.weights_bytes), bytes_per_s=rates.weights_bytes_per_s),
        term("kv_read", kv, "memory", not compute_bound,
             bytes=round(work.kv_bytes), bytes_per_s=rates.kv_bytes_per_s),
        term("matmul", matmul, "compute", compute_bound,
             flops=work.matmul_flops, flops_per_s=flops or 0.0, tokens=work.batch_tokens),
        term("attention", attention, "compute", compute_bound,
             flops=work.attention_flops, flops_per_s=flops or 0.0),
        term("all_reduce", 2 * work.layers * one_ar, "communication", True,
             count=2 * work.layers if work.tp > 1 else 0, message_bytes=message, tp=work.tp,
             one_seconds=one_ar, link_bytes_per_s=rates.link_bytes_per_s,
             hop_latency_seconds=rates.hop_latency_seconds,
             base_seconds=c.all_reduce_base_seconds),
        term("pipeline_handoff", handoff, "communication", True,
             count=work.pp - 1, message_bytes=message, link_bytes_per_s=rates.link_bytes_per_s),
        term("per_layer", work.layers * c.per_layer_seconds
             + work.moe_layers * c.per_moe_layer_seconds, "fixed", True,
             layers=work.layers, per_layer_seconds=c.per_layer_seconds,
             moe_layers=work.moe_layers, per_moe_layer_seconds=c.per_moe_layer_seconds),
        term("per_step", c.per_step_seconds + work.requests * c.per_request_seconds, "fixed",
             True, seconds_each=c.per_step_seconds, requests=work.requests,
             per_request_seconds=c.per_request_seconds),
    ]  # fmt: skip


def step_rates(
    gpu: Gpu | None,
    bandwidth_bytes_per_s: float,
    weights_8bit: bool,
    calibration: CalibrationLike | None,
    constants: StepConstants = FITTED,
) -> StepRates:
    """The rates the terms divide by: datasheet × fitted efficiency, or a calibration's own
    measured rates where it has them (bandwidth, matmul rate, per-layer cost)."""
    peak = None
    if gpu is not None:
        peak = gpu.fp8_dense_flops if weights_8bit and gpu.fp8_dense_flops else None
        peak = peak or gpu.bf16_dense_flops
    link = (gpu.link_bandwidth_bytes_per_s if gpu else None) or DEFAULT_LINK_BANDWIDTH_BYTES_PER_S
    hop = (gpu.link_latency_seconds if gpu else None) or DEFAULT_LINK_LATENCY_SECONDS
    stream = bandwidth_bytes_per_s * constants.bandwidth_efficiency
    weights_rate = stream
    kv_rate = bandwidth_bytes_per_s * constants.kv_bandwidth_efficiency
    flops = peak * constants.matmul_efficiency if peak else None
    measured: set[str] = set()
    if calibration is not None:
        weights_rate = calibration.copy_bandwidth_bytes_per_s
        kv_rate = calibration.decode_bandwidth_bytes_per_s
        measured |= {"weights_read", "kv_read"}
        if calibration.matmul_flops_per_s:
            flops = calibration.matmul_flops_per_s
            measured |= {"matmul", "attention"}
        if calibration.per_layer_overhead_seconds is not None:
            # The probe's per-attention-call cost and the validated per-layer cost together.
            per_layer = calibration.per_layer_overhead_seconds + calibration.fixed_overhead_seconds
            constants = constants.with_(per_layer_seconds=per_layer)
            measured.add("per_layer")
    return StepRates(
        weights_bytes_per_s=weights_rate,
        kv_bytes_per_s=kv_rate,
        flops_per_s=flops,
        link_bytes_per_s=link * constants.link_efficiency,
        hop_latency_seconds=hop,
        constants=constants,
        measured=frozenset(measured),
    )


def expected_step(
    work: StepWork,
    rates: StepRates,
    *,
    floor_seconds: float,
    requests: int,
    constants_source: str,
    draft_seconds: float = 0.0,
    tokens_per_step: float | None = None,
    acceptance_rate: float | None = None,
) -> ExpectedOut:
    """The expected step (never below `floor_seconds`) and TPOT for `requests` requests."""
    terms = step_terms(work, rates)
    if draft_seconds > 0:
        terms.append(
            StepTermOut(code="draft_steps", seconds=draft_seconds, group="memory", counted=True,
                        measured=False, params={"tokens_per_step": tokens_per_step})
        )  # fmt: skip
    step = sum(t.seconds for t in terms if t.counted)
    step = max(step, floor_seconds)
    per_request_tokens = tokens_per_step or 1.0
    compute = sum(t.seconds for t in terms if t.group == "compute")
    memory = sum(t.seconds for t in terms if t.group == "memory")
    return ExpectedOut(
        decode_step_seconds=step,
        tpot_seconds=step / per_request_tokens,
        decode_tokens_per_s=requests * per_request_tokens / step if step > 0 else 0.0,
        batch_requests=requests,
        dominant="compute" if compute > memory else "memory",
        terms=terms,
        constants_source=constants_source,
        measured_terms=sorted(rates.measured),
        tokens_per_step=tokens_per_step,
        acceptance_rate=acceptance_rate,
    )


def weights_are_8bit(inp: Inputs) -> bool:
    """8-bit weights (fp8 checkpoints, or a weights size of about one byte a parameter) run
    their matmuls at the GPU's fp8 rate; wider or narrower ones (mxfp4 on Hopper) at bf16."""
    params, size = inp.model.num_parameters, inp.weights_bytes
    if inp.shape.quant_method in ("fp8", "fbgemm_fp8"):
        return True
    return bool(params and size and 0.75 <= size / params <= 1.25)


def plan_expected(
    inp: Inputs,
    *,
    requests: int,
    weights_bytes: float,
    kv_bytes: float,
    attention_flops_per_kv_byte: float,
    floor_seconds: float,
    bandwidth_bytes_per_s: float,
    speculative: SpeculativeBoundsOut | None,
) -> tuple[ExpectedOut, list[Note]]:
    """`bounds.expected` for a plan: the floor's bytes, the model's FLOPs, the GPU's rates."""
    sp = inp.speculation
    k = sp.num_speculative_tokens if sp is not None else 0
    tokens = requests * (k + 1)  # the target verifies k drafts and one new token per request
    shape, split = inp.shape, inp.model.weight_split
    params = inp.model.prefill_parameters or inp.model.num_parameters or 0
    rates = step_rates(
        inp.gpu,
        bandwidth_bytes_per_s,
        weights_are_8bit(inp),
        inp.calibration,
        FITTED.for_scheduler(inp.engine.compiled_scheduler),
    )
    work = StepWork(
        batch_tokens=tokens,
        requests=requests,
        weights_bytes=weights_bytes,
        kv_bytes=kv_bytes,
        matmul_flops=2.0 * params * tokens / inp.tp,
        attention_flops=attention_flops_per_kv_byte * kv_bytes * (k + 1),
        layers=shape.num_hidden_layers,
        moe_layers=split.moe_layers if split is not None and split.num_experts else 0,
        hidden_size=shape.hidden_size or shape.num_attention_heads * shape.head_dim,
        tp=inp.tp,
        pp=inp.pp,
    )
    draft = 0.0
    if speculative is not None and sp is not None and speculative.draft_read_seconds > 0:
        # The draft's own reads at the expected rate, and its layers' fixed cost, k times.
        draft = speculative.draft_read_seconds * bandwidth_bytes_per_s / rates.kv_bytes_per_s
        draft += k * len(sp.draft_layers) * rates.constants.per_layer_seconds
    calibration = inp.calibration
    out = expected_step(
        work,
        rates,
        floor_seconds=floor_seconds,
        requests=requests,
        constants_source=str(calibration.id) if calibration is not None else "catalog",
        draft_seconds=draft,
        tokens_per_step=speculative.tokens_per_step if speculative is not None else None,
        acceptance_rate=speculative.acceptance_rate if speculative is not None else None,
    )
    notes = [
        note(
            "bounds.expected",
            expected_ms=f"{out.decode_step_seconds * 1e3:.3f}",
            floor_ms=f"{floor_seconds * 1e3:.3f}",
            source=out.constants_source,
        )
    ]
    if inp.request.enforce_eager:
        notes.append(note("bounds.expected_eager"))
    if inp.tp > 1 and (inp.gpu is None or inp.gpu.link_bandwidth_bytes_per_s is None):
        notes.append(
            note(
                "bounds.expected_no_link",
                link_gbps=f"{DEFAULT_LINK_BANDWIDTH_BYTES_PER_S / 1e9:.0f}",
            )
        )
    return out, notes


__all__ = [
    "ACTIVATION_BYTES",
    "StepRates",
    "StepWork",
    "all_reduce_seconds",
    "expected_step",
    "plan_expected",
    "step_rates",
    "step_terms",
    "weights_are_8bit",
]
