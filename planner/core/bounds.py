"""Lower bounds on time: bandwidth floors for decode, compute floors for prefill.

Seed 004: a decode step reads every layer's KV of every request once, plus the weights, so
`bytes / bandwidth` is a floor (1 GiB at 1.5 TB/s ≈ 0.716 ms). A single decode query does ~1
FLOP per byte in bf16; GQA raises it by sharing one KV read across the query group. Amdahl tells
what compressing KV buys: only the attention share shrinks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from planner.core import schema as s
from planner.core.capacity import Pool
from planner.core.expected import plan_expected
from planner.core.fit import build_pool
from planner.core.inputs import Inputs
from planner.core.moe import decode_weight_read
from planner.core.notes import Note, note
from planner.core.parallel import RankLayout
from planner.core.sizing import stage_kv_bytes
from planner.core.speculative_schema import SpeculativeBoundsOut
from planner.core.units import fmt_gib, fmt_tbps


def read_seconds(n_bytes: int, bandwidth_bytes_per_s: float) -> float:
    """Time to stream `n_bytes` once at `bandwidth_bytes_per_s` (decimal B/s)."""
    return n_bytes / bandwidth_bytes_per_s


def decode_attention_intensity(
    *,
    query_heads_per_kv_head: int,
    head_size_k: int,
    head_size_v: int,
    bytes_per_token_head: float,
    mla: bool = False,
) -> float:
    """FLOPs per byte of decode attention at q_len = 1 (2 FLOPs per multiply-add, no softmax).

    For one KV head read over T tokens: bytes = T × bytes_per_token_head. Each of the g query
    heads sharing it does QK (T × d_k multiply-adds) and AV (T × d_v), so FLOPs = g·2T(d_k+d_v).
    MLA: K is the whole latent (kv_lora_rank + rope) and V its first kv_lora_rank columns."""
    if mla:
        d_k = head_size_k + head_size_v  # latent + rope part
        d_v = head_size_k
    else:
        d_k, d_v = head_size_k, head_size_v
    flops_per_token = query_heads_per_kv_head * 2 * (d_k + d_v)
    return flops_per_token / bytes_per_token_head


def amdahl_speedup(attention_share: float, kv_ratio: float) -> float:
    """Step-time speedup when only the KV part (a share p of the step) scales by `kv_ratio`."""
    return 1.0 / ((1.0 - attention_share) + attention_share * kv_ratio)


def positions_processed(prompt_tokens: int, output_tokens: int) -> tuple[int, int]:
    """Positions run through the model to produce `output_tokens` tokens after a prompt.

    Without a cache every step re-runs the whole prefix: P + (P+1) + … ; with a cache the
    prefill runs P positions and each later step one (seed 004 §04: 4+5+6 = 15 vs 4+1+1 = 6)."""
    if output_tokens == 0:
        return 0, 0
    without = output_tokens * prompt_tokens + output_tokens * (output_tokens - 1) // 2
    with_cache = prompt_tokens + (output_tokens - 1)
    return without, with_cache


def prefill_flops(
    *, num_parameters: int, prompt_tokens: int, layers: int, query_heads: int, head_dim: int
) -> float:
    """Dense prefill FLOPs: 2 per parameter per token, plus causal attention (QK and AV over the
    lower triangle: 2 × 2 × L × Hq × d × T²/2)."""
    linear = 2.0 * num_parameters * prompt_tokens
    attention = 2.0 * layers * query_heads * head_dim * prompt_tokens * prompt_tokens
    return linear + attention


@dataclass(frozen=True, slots=True)
class StepFloor:
    kv_read_seconds: float
    weights_read_seconds: float

    @property
    def step_seconds(self) -> float:
        return self.kv_read_seconds + self.weights_read_seconds

    @property
    def attention_share(self) -> float:
        total = self.step_seconds
        return self.kv_read_seconds / total if total > 0 else 0.0


# ---------------------------------------------------------------------------------------------
# The bounds step of plan(): decode floor, calibrated estimate, intensity, prefill, what-if.


def _same_device(measured: str, *names: str | None) -> bool:
    """Whether a calibration's device and the plan's GPU share a model token (H100, MI300X…)."""

    def tokens(text: str) -> set[str]:
        return set(re.findall(r"[a-z]+\d+[a-z]*", text.lower()))

    wanted = set().union(*(tokens(n) for n in names if n))
    return bool(tokens(measured) & wanted)


def _iso(value: Any) -> str:
    """RFC 3339 as the API prints it (UTC as `Z`)."""
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return str(value)


def _weights_read(inp: Inputs, batch_tokens: int) -> tuple[int, Note | None]:
    """Weight bytes one decode step streams (all ranks): all of them but what a step only
    indexes (the input embedding table, a vision tower that does not run) and, for
    mixture-of-experts, the experts the batch does not touch."""
    total = inp.weights_bytes or 0
    split = inp.model.weight_split
    if split is None or not total or split.total <= 0:
        return total, None
    # The split's proportions, scaled to the size given (a checkpoint's or the request's).
    scale = total / split.total
    skipped = (split.dense - split.dense_read) * scale
    if not split.num_experts:
        return max(0, round(total - skipped)), None
    read = decode_weight_read(split, batch_tokens)
    untouched = split.moe_layers * (split.num_experts - read.experts_per_layer) * split.expert
    streamed = max(0, round(total - skipped - untouched * scale))
    return streamed, note(
        "bounds.moe_active_weights",
        batch=batch_tokens,
        experts=read.experts_per_layer,
        num_experts=split.num_experts,
        top_k=split.top_k,
        read_gib=fmt_gib(streamed),
        total_gib=fmt_gib(total),
    )


def decode_bounds(
    inp: Inputs,
    layouts: Sequence[RankLayout],
    capacity: s.CapacityOut | None,
    pool: Pool | None,
) -> tuple[s.BoundsOut | None, list[Note]]:
    request, gpu, calibration, shape = inp.request, inp.gpu, inp.calibration, inp.shape
    dtype, policy, ctx = inp.kv_dtype, inp.policy, inp.context_tokens
    if request.bandwidth_bytes_per_s is not None:
        bw, source = request.bandwidth_bytes_per_s, "request"
    elif gpu is not None:
        bw, source = gpu.bandwidth_bytes_per_s, "gpu"
    elif calibration is not None:
        bw, source = calibration.copy_bandwidth_bytes_per_s, "calibration"
    else:
        return None, []
    notes: list[Note] = []
    bandwidth_source = source  # where the floor's bandwidth comes from
    if calibration is not None:
        source = "calibration"  # the bounds carry a calibrated estimate
        if gpu is not None and not _same_device(calibration.device_name, gpu.name, gpu.id):
            notes.append(
                note(
                    "bounds.calibration_other_device",
                    measured_on=calibration.device_name,
                    gpu=gpu.name,
                )
            )

    # Batch: the given workload, else as many requests of ctx as run at once, else one.
    if inp.workload_given:
        batch, batch_shared = list(inp.mixes), list(inp.shared_prefix_tokens)
        batch_reusers = list(inp.prefix_reusers)
    else:
        n = capacity.max_running_requests if capacity and capacity.max_running_requests else 1
        batch, batch_shared = [s.RequestMix(context_tokens=ctx, count=n)], [0]
        batch_reusers = [0]
    n_batch = sum(m.count for m in batch)
    tp, pp = inp.tp, inp.pp
    read_bytes, moe_note = _weights_read(inp, n_batch)
    if moe_note is not None:
        notes.append(moe_note)
    weights_rank = read_bytes / tp  # one token passes every stage: the stages' reads add up

    def kv_read_bytes(mix: Sequence[s.RequestMix], sh: Sequence[int], again: Sequence[int]) -> int:
        """One decode step reads every stage's KV of every request once."""
        return sum(stage_kv_bytes(lay, dtype, mix, policy, sh, again) for lay in layouts)

    # Every layer of every stage with its bytes per token, for the sweep's many lengths.
    weighted = [(x, n * x.bytes_per_token(dtype)) for lay in layouts for x, n in lay.stack]

    def kv_at(length: int, count: int) -> int:
        return count * sum(w * x.tokens_kept(length, policy) for x, w in weighted)

    def floor_for(kv: int) -> StepFloor:
        return StepFloor(read_seconds(kv, bw), read_seconds(round(weights_rank), bw))

    batch_kv = kv_read_bytes(batch, batch_shared, batch_reusers)
    floor = floor_for(batch_kv)
    if pp > 1:
        notes.append(note("bounds.pipeline_sum"))
    if inp.weights_bytes is None:
        notes.append(note("bounds.weights_unknown"))

    main = shape.attention_spec or shape.layers[0]
    b_head = main.per_rank(1).bytes_per_token(dtype)  # one token of one KV head
    intensity = decode_attention_intensity(
        query_heads_per_kv_head=shape.query_group_size,
        head_size_k=main.head_size,
        head_size_v=main.head_size_v,
        bytes_per_token_head=b_head,
        mla=shape.is_mla,
    )
    mha = 2.0 / dtype.bytes_per_element

    pf_flops = pf_seconds = None
    # Prefill multiplies every token by the weights it is routed through (MoE: active only;
    # the input embedding is a lookup).
    pf_params = inp.model.prefill_parameters or inp.model.num_parameters
    if pf_params:
        pf_flops = prefill_flops(
            num_parameters=pf_params,
            prompt_tokens=ctx,
            layers=shape.num_hidden_layers,
            query_heads=shape.num_attention_heads,
            head_dim=shape.head_dim,
        )
        if gpu is not None and gpu.bf16_dense_flops:
            pf_seconds = pf_flops / (gpu.bf16_dense_flops * tp)

    calibrated = None
    if calibration is not None:
        calls = sum(lay.layers for lay in layouts)
        weights_seconds = weights_rank / calibration.copy_bandwidth_bytes_per_s
        est = (
            calls * calibration.fixed_overhead_seconds
            + batch_kv / calibration.decode_bandwidth_bytes_per_s
            + weights_seconds
        )
        # A validated record (kvplan probe --validate) adds the step's other work: a cost per
        # layer, and matmuls that outlast the weight stream once the batch is large enough.
        per_layer = calibration.per_layer_overhead_seconds
        flops = calibration.matmul_flops_per_s
        matmul = 0.0
        if per_layer is not None:
            est += calls * per_layer
        if flops and pf_params:
            matmul = 2.0 * pf_params / tp * n_batch / flops
            est += max(0.0, matmul - weights_seconds)
        calibrated = s.CalibratedOut(
            calibration_id=str(calibration.id),
            device_name=calibration.device_name,
            measured_at=_iso(calibration.measured_at),
            decode_bandwidth_bytes_per_s=calibration.decode_bandwidth_bytes_per_s,
            fixed_overhead_seconds=calibration.fixed_overhead_seconds,
            attention_calls=calls,
            per_layer_overhead_seconds=per_layer,
            matmul_flops_per_s=flops or None,
            matmul_seconds=matmul if flops and pf_params else None,
            decode_step_seconds=est,
            decode_tokens_per_s=n_batch / est if est > 0 else 0.0,
        )
        notes.append(
            note(
                "bounds.calibrated",
                device=calibration.device_name,
                measured_at=calibrated.measured_at,
                calls=calls,
                decode_tbps=fmt_tbps(calibration.decode_bandwidth_bytes_per_s),
                floor_tbps=fmt_tbps(bw),
            )
        )
        if flops and pf_params:
            notes.append(
                note(
                    "bounds.calibrated_terms",
                    calls=calls,
                    per_layer_us=f"{(per_layer or 0.0) * 1e6:.1f}",
                    matmul_ms=f"{matmul * 1e3:.3f}",
                    tflops=f"{flops / 1e12:.2f}",
                )
            )
        elif per_layer is not None:
            notes.append(
                note(
                    "bounds.calibrated_layer_term",
                    calls=calls,
                    per_layer_us=f"{per_layer * 1e6:.1f}",
                )
            )

    sweep: list[s.SweepPointOut] = []
    top = max(ctx, inp.max_model_len or ctx, 1024)
    length = 1024
    while length <= min(top, 1 << 20) and len(sweep) < 12:
        pt = floor_for(kv_at(length, n_batch))
        sweep.append(
            s.SweepPointOut(
                context_tokens=length,
                kv_read_seconds=pt.kv_read_seconds,
                weights_read_seconds=pt.weights_read_seconds,
                attention_share=pt.attention_share,
            )
        )
        length *= 2

    ratio = request.kv_compression_ratio or 0.5
    share = floor.attention_share
    what_if_max = None
    if pool is not None and capacity is not None:
        scaled = build_pool(inp, int(capacity.kv_budget_bytes / ratio))
        what_if_max = scaled.max_requests(ctx)
    what_if = s.WhatIfOut(
        kv_compression_ratio=ratio,
        attention_share=share,
        decode_step_seconds=floor.weights_read_seconds + floor.kv_read_seconds * ratio,
        speedup=amdahl_speedup(share, ratio),
        max_requests=what_if_max,
    )
    step = floor.step_seconds
    speculative = None
    if inp.speculation is not None:
        speculative, more = _speculative_bound(inp, batch, batch_kv, weights_rank, bw)
        notes.extend(more)
    expected = None
    if gpu is not None or calibration is not None:
        expected, more = plan_expected(
            inp,
            requests=n_batch,
            weights_bytes=weights_rank,
            kv_bytes=batch_kv,
            attention_flops_per_kv_byte=intensity,
            floor_seconds=speculative.step_seconds if speculative is not None else step,
            bandwidth_bytes_per_s=bw,
            speculative=speculative,
        )
        notes.extend(more)
    out = s.BoundsOut(
        bandwidth_bytes_per_s=bw,
        source=source,
        bandwidth_source=bandwidth_source,
        batch_requests=n_batch,
        kv_read_seconds=floor.kv_read_seconds,
        weights_read_seconds=floor.weights_read_seconds,
        decode_step_seconds=step,
        decode_tokens_per_s=n_batch / step if step > 0 else 0.0,
        arithmetic_intensity_flops_per_byte=intensity,
        arithmetic_intensity_mha_flops_per_byte=mha,
        attention_share=share,
        prefill_flops=pf_flops,
        prefill_compute_seconds=pf_seconds,
        calibrated=calibrated,
        context_sweep=sweep,
        what_if=what_if,
        speculative=speculative,
        expected=expected,
    )
    return out, notes


def _speculative_bound(
    inp: Inputs, batch: Sequence[s.RequestMix], batch_kv: int, weights: float, bw: float
) -> tuple[SpeculativeBoundsOut, list[Note]]:
    """One speculative step: k draft steps (each reads the draft's KV and weights), then one
    target step that verifies the k drafts of every request with one read of its weights and
    KV. Per accepted token: that step over the tokens it yields, 1 + a + … + a^k."""
    sp = inp.speculation
    assert sp is not None
    k = sp.num_speculative_tokens
    draft_specs = [
        inp.engine.rank_spec(c, inp.tp) for layer in sp.draft_layers for c in layer.cache_specs()
    ]
    draft_kv = sum(
        m.count
        * sum(d.tokens_kept(m.context_tokens, inp.policy) * d.bytes_per_token(inp.kv_dtype)
              for d in draft_specs)
        for m in batch
    )  # fmt: skip
    draft_weights = (sp.draft_weights_bytes or 0) / inp.tp if draft_specs else 0.0
    target = read_seconds(max(0, batch_kv - draft_kv), bw) + read_seconds(round(weights), bw)
    draft = k * read_seconds(draft_kv + round(draft_weights), bw) if draft_specs else 0.0
    step = target + draft
    tokens = sp.tokens_per_step()
    n_batch = sum(m.count for m in batch)
    notes: list[Note] = []
    if tokens is not None and sp.acceptance_rate is not None:
        notes.append(note("speculative.bound", k=k, rate=sp.acceptance_rate, tokens=tokens))
    return (
        SpeculativeBoundsOut(
            num_speculative_tokens=k,
            acceptance_rate=sp.acceptance_rate,
            tokens_per_step=tokens,
            draft_read_seconds=draft,
            step_seconds=step,
            seconds_per_accepted_token=step / tokens if tokens and step > 0 else None,
            tokens_per_s=n_batch * tokens / step if tokens and step > 0 else None,
        ),
        notes,
    )
