"""`kvplan probe --validate`: does the calibration predict a real model's decode step?

The probe gives `t0`, `BW_eff` (decode attention) and `BW_copy`; the planner's calibrated
estimate of a step is `layers x t0 + KV bytes / BW_eff + weights / BW_copy` ("bytes only").
This module times a real Llama-shaped model (transformers, random weights, `planner.probe.steps`)
at several batch x context points, asks the planner for each point through `POST /api/v1/plan`
with the stored `calibration_id`, and reports measured, calibrated and floor side by side.

The step also runs work that bytes / BW leaves out (norms, the matmuls' compute, launches,
sampling). Two terms cover it, fitted on the *training* points only, by the same relative-error
least squares as the probe's fit:

    step = layers x (t0 + per_layer_overhead) + KV / BW_eff
           + max(weights / BW_copy, 2 x params x batch / F)

(the weights stream while the matmuls compute, so the slower of the two counts; F is the
matmul rate the device reaches at these small batches).

The *held-out* points, never seen by the fit, give `median_abs_error` and `max_abs_error`.
The result is a second stored calibration: the probe's figures plus the two terms and the
validation table, so the evidence travels with the record.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from planner.probe.backend import ProbeFailed, ProbeUnavailable
from planner.probe.cpu import CpuConfig
from planner.probe.model import (
    AttentionShape,
    Calibration,
    CalibrationIn,
    StepTerms,
    ValidationPoint,
    ValidationSummary,
)
from planner.probe.steps import ModelSpec, StepConfig, StepRun, time_steps

Point = tuple[int, int]  # (batch, context_tokens)
PLAN_PATH = "/api/v1/plan"
CALIBRATIONS_PATH = "/api/v1/calibrations"


def _llama(
    hidden: int, inter: int, layers: int, heads: int, kv_heads: int, head_dim: int, vocab: int
) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "vocab_size": vocab,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
    }


@dataclass(frozen=True, slots=True)
class ValidationPlan:
    """A model, its training and held-out points, and how long to time each."""

    spec: ModelSpec
    training: tuple[Point, ...]
    held_out: tuple[Point, ...]
    steps: StepConfig = field(default_factory=StepConfig)
    # CPU only: the probe's sizes and threads, and torch's threads for the model (one by
    # default: on a shared host an OpenMP team stalls whenever one of its threads is
    # descheduled, which times the neighbours, not the memory).
    cpu_probe: CpuConfig = field(default_factory=lambda: CpuConfig(threads=1))
    # CPU: the probe's buffers stay under this, so the model's caches have the rest.
    probe_memory_bytes: int | None = None

    @property
    def shape(self) -> AttentionShape:
        c = self.spec.config
        return AttentionShape(
            num_q_heads=c["num_attention_heads"],
            num_kv_heads=c["num_key_value_heads"],
            head_dim=c["head_dim"],
        )

    def kv_bytes_needed(self) -> int:
        """KV held at once: every point's cache when interleaved, else the largest one."""
        sizes = [self.spec.kv_bytes(b, c) for b, c in (*self.training, *self.held_out)]
        return sum(sizes) if self.steps.interleave else max(sizes)


# CPU: ~124M parameters in fp32 (~430 MB read per step), so weights dominate small points and
# KV (16 KiB per token) dominates the large ones; contexts are multiples of 16 (vLLM's block).
CPU_VALIDATION = ValidationPlan(
    spec=ModelSpec(
        "Llama-shaped 124M (8 layers, 16/4 heads, d 64) fp32",
        {**_llama(1024, 2816, 8, 16, 4, 64, 16384), "torch_dtype": "float32"},
        "fp32",
    ),
    training=((1, 512), (8, 512), (1, 4096), (8, 2048)),
    held_out=((2, 1024), (4, 2048), (2, 4096), (6, 1024), (4, 4096), (8, 4096)),
    # Every cache resident (1.6 GB of KV): short interleaved rounds spread a shared host's noise.
    steps=StepConfig(warmup_steps=1, repeats=3, passes=7, interleave=True),
    probe_memory_bytes=1 << 30,
)

# CUDA: the Llama-3.1-8B shape in bf16 (128 KiB of KV per token); the largest points hold 64 GiB
# of KV beside 16 GB of weights, within an H200's memory.
CUDA_VALIDATION = ValidationPlan(
    spec=ModelSpec(
        "Llama-3.1-8B shape (32 layers, 32/8 heads, d 128) bf16",
        {**_llama(4096, 14336, 32, 32, 8, 128, 128256), "torch_dtype": "bfloat16"},
        "bf16",
    ),
    training=((1, 1024), (64, 1024), (16, 4096), (32, 16384)),
    held_out=((8, 8192), (32, 4096), (64, 8192), (128, 2048), (16, 16384), (4, 32768)),
    steps=StepConfig(warmup_steps=3, repeats=20, passes=2),
)


def default_plan(device: str) -> ValidationPlan:
    return CUDA_VALIDATION if device == "cuda" else CPU_VALIDATION


def resolve_device(device: str) -> Literal["cuda", "cpu"]:
    if device in ("cuda", "cpu"):
        return "cuda" if device == "cuda" else "cpu"
    if device != "auto":
        raise ProbeUnavailable(f"unknown device {device!r}; use auto, cuda or cpu")
    from planner.probe.cuda import cuda_available

    return "cuda" if cuda_available() else "cpu"


def probe_and_validate(
    device: str,
    link: PlannerLink,
    *,
    max_seconds: float,
    max_memory_bytes: int | None = None,
    threads: int | None = None,
) -> ValidationResult:
    """The probe with the validation model's attention shape, then `validate` (CLI and API)."""
    from planner.probe.run import run_probe

    device = resolve_device(device)
    plan = default_plan(device)
    cpu = plan.cpu_probe
    if threads is not None:
        cpu = replace(cpu, threads=threads)
    probe = run_probe(
        device,
        max_seconds,
        shape=plan.shape,
        dtype="fp16" if plan.spec.dtype == "fp16" else "bf16",
        max_memory_bytes=max_memory_bytes or (plan.probe_memory_bytes if device == "cpu" else None),
        cpu_config=cpu,
    )
    return validate(
        probe, link, device=device, plan=plan, threads=cpu.threads if device == "cpu" else None
    )


# --- talking to the planner -------------------------------------------------------------------


class PlannerError(RuntimeError):
    """The planner refused a calibration or a plan (its problem detail is the message)."""


@dataclass(frozen=True, slots=True)
class PlannerLink:
    """How validation stores calibrations and plans points: HTTP to an app, or in-process."""

    add: Callable[[CalibrationIn], Calibration]
    plan: Callable[[dict[str, Any]], dict[str, Any]]
    path: str


def http_link(client: Any, token: str, base: str = "", label: str | None = None) -> PlannerLink:
    """Through the HTTP API: `client` is an httpx.Client or a starlette TestClient."""

    def check(resp: Any, want: int, what: str) -> dict[str, Any]:
        if resp.status_code != want:
            raise PlannerError(f"{what} answered {resp.status_code}: {resp.text[:400]}")
        body: dict[str, Any] = resp.json()
        return body

    def add(record: CalibrationIn) -> Calibration:
        resp = client.post(
            base + CALIBRATIONS_PATH,
            content=record.model_dump_json(exclude_none=True),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        return Calibration.model_validate(check(resp, 201, f"POST {CALIBRATIONS_PATH}"))

    def plan(body: dict[str, Any]) -> dict[str, Any]:
        return check(client.post(base + PLAN_PATH, json=body), 200, f"POST {PLAN_PATH}")

    return PlannerLink(add, plan, label or f"POST {PLAN_PATH} with calibration_id")


def core_link(
    store: Any, label: str = "plan() with the stored calibration_id, as POST /api/v1/plan runs it"
) -> PlannerLink:
    """In-process without HTTP: `store.add`, and `planner.service.plan` with the calibration read
    back from the store, the calls `POST /api/v1/plan` makes for a `calibration_id`."""
    from planner.core.schema import PlanRequest
    from planner.service import plan  # what POST /api/v1/plan calls: core over the catalog

    def plan_point(request: dict[str, Any]) -> dict[str, Any]:
        parsed = PlanRequest.model_validate(request)
        found = store.get(str(parsed.calibration_id))
        out: dict[str, Any] = plan(parsed, calibration=found).model_dump(mode="json")
        return out

    return PlannerLink(store.add, plan_point, label)


def plan_body(
    spec: ModelSpec,
    point: Point,
    *,
    weights_bytes: int,
    calibration_id: str,
    bandwidth_bytes_per_s: float | None,
) -> dict[str, Any]:
    """What a user would send for this step: the model's config, the batch, and the
    checkpoint's weights (the planner leaves out what a step only indexes, the input
    embedding table, as `weights_read_bytes` does for the timed model)."""
    batch, ctx = point
    body: dict[str, Any] = {
        "model": spec.config,
        # The step is timed in transformers (a static cache, no paging): plan it by its rules.
        "engine": "transformers",
        "requests": [{"context_tokens": ctx, "count": batch}],
        "context_tokens": ctx,
        "kv_cache_dtype": spec.dtype,
        "weights_bytes": weights_bytes,
        "calibration_id": calibration_id,
    }
    if bandwidth_bytes_per_s is not None:
        body["bandwidth_bytes_per_s"] = bandwidth_bytes_per_s
    return body


_DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}

# --- the fit ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FittedTerms:
    per_layer_overhead_seconds: float
    matmul_flops_per_s: float | None
    clamped: tuple[str, ...]


def step_seconds(
    bytes_only_seconds: float,
    weights_seconds: float,
    *,
    layers: int,
    parameters: int,
    batch: int,
    per_layer_overhead_seconds: float | None,
    matmul_flops_per_s: float | None,
) -> float:
    """The calibrated step: the bytes-only estimate with the two step terms.

    `bytes_only - weights_seconds + max(weights_seconds, 2 x params x batch / F)
    + layers x per_layer_overhead`: the weights stream while the matmuls compute, so the
    slower of the two counts (a roofline), and every layer adds its fixed cost.
    """
    out = bytes_only_seconds + layers * (per_layer_overhead_seconds or 0.0)
    if matmul_flops_per_s:
        out += max(0.0, 2.0 * parameters * batch / matmul_flops_per_s - weights_seconds)
    return out


def _fit_at(
    flops: float | None,
    layers: int,
    parameters: int,
    points: Sequence[tuple[int, float, float, float]],
) -> tuple[float, float, bool]:
    """(per-layer overhead, relative SSE, clamped) at one matmul rate."""
    ws = [1.0 / (m * m) for _, m, _, _ in points]
    resid = [
        m
        - step_seconds(
            e,
            w,
            layers=layers,
            parameters=parameters,
            batch=b,
            per_layer_overhead_seconds=0.0,
            matmul_flops_per_s=flops,
        )
        for b, m, e, w in points
    ]
    a = sum(w * r for w, r in zip(ws, resid, strict=True)) / sum(ws)
    clamped = a < 0
    a = max(0.0, a)
    sse = sum(w * (r - a) ** 2 for w, r in zip(ws, resid, strict=True))
    return a / layers, sse, clamped


def fit_step_terms(
    layers: int,
    parameters: int,
    points: Sequence[tuple[int, float, float, float]],
) -> FittedTerms:
    """Fit the two step terms to (batch, measured, bytes_only, weights_seconds) points.

    Minimises the relative error (weights 1/measured^2, as the probe's fit). For each matmul
    rate F on a log grid (2.3 % steps from 1e8 to 1e17 FLOP/s, and "none") the per-layer cost
    is the weighted mean residual; the F with the smallest error wins, "none" on ties (a rate
    the training points cannot see is not reported). A negative per-layer cost is unphysical:
    it is set to 0 and the record says so.
    """
    if not points:
        raise ProbeFailed("no training points to fit the step terms on")
    best_flops: float | None = None
    best_a, best_sse, best_clamped = _fit_at(None, layers, parameters, points)
    steps = 900
    for k in range(steps + 1):
        flops = 10 ** (17 - 9 * k / steps)
        a, sse, clamped = _fit_at(flops, layers, parameters, points)
        if sse < best_sse * (1 - 1e-9):
            best_flops, best_a, best_sse, best_clamped = flops, a, sse, clamped
    return FittedTerms(
        per_layer_overhead_seconds=best_a,
        matmul_flops_per_s=best_flops,
        clamped=("per_layer",) if best_clamped else (),
    )


def _err(estimate: float, measured: float) -> float:
    return max(-1e3, min(1e3, (estimate - measured) / measured))


def _abs_stats(errors: Sequence[float]) -> tuple[float, float]:
    vals = [abs(e) for e in errors]
    return (statistics.median(vals), max(vals)) if vals else (0.0, 0.0)


# --- the run ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ValidationResult:
    probe: Calibration  # the plain probe record the points were planned with
    calibration: Calibration  # the probe's figures + step terms + the validation table


def check_resources(plan: ValidationPlan, *, device: str, parameters_bytes: int) -> None:
    """Refuse before building anything when the model and its largest cache cannot fit."""
    need = int((parameters_bytes + plan.kv_bytes_needed()) * 1.25)
    if device == "cuda":
        torch = __import__("torch")
        free, _ = torch.cuda.mem_get_info()
        have, where = int(free), "free device memory"
    else:
        from planner.probe.cpu import available_memory_bytes

        have, where = available_memory_bytes(), "available host memory"
    if need > have:
        raise ProbeUnavailable(
            f"validation needs about {need / 2**30:.1f} GiB (model and its largest KV cache) "
            f"but {where} is {have / 2**30:.1f} GiB"
        )


def estimate_parameters_bytes(spec: ModelSpec) -> int:
    """Weights of a Llama-shaped config (q, k, v, o, gate/up/down, norms, embed, head)."""
    c = spec.config
    h, inter, d = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    per_layer = h * q + 2 * h * kv + q * h + 3 * h * inter + 2 * h
    embed = c["vocab_size"] * h * (1 if c.get("tie_word_embeddings") else 2)
    return int((spec.layers * per_layer + embed + h) * spec.itemsize)


def validate(
    probe: CalibrationIn,
    link: PlannerLink,
    *,
    device: str,
    plan: ValidationPlan | None = None,
    threads: int | None = None,
    use_graphs: bool = True,
    timer: Callable[..., StepRun] = time_steps,
) -> ValidationResult:
    """Time the model, plan every point with the stored probe, fit on training, report held-out."""
    plan = plan or default_plan(device)
    started = time.monotonic()
    overlap = set(plan.training) & set(plan.held_out)
    if overlap:
        raise ValueError(f"points {sorted(overlap)} are both training and held-out")
    check_resources(plan, device=device, parameters_bytes=estimate_parameters_bytes(plan.spec))
    stored = link.add(probe)
    points = [*plan.training, *plan.held_out]
    run = timer(
        plan.spec,
        points,
        device=device,
        threads=threads,
        config=plan.steps,
        use_graphs=use_graphs,
        sdpa_backend=probe.backend,
    )
    ds = probe.datasheet_bandwidth_bytes_per_s
    notes = list(run.notes)
    rows: list[dict[str, Any]] = []
    for timing in run.timings:
        point = (timing.batch, timing.context_tokens)
        body = plan_body(
            plan.spec,
            point,
            weights_bytes=run.parameters * _DTYPE_BYTES[plan.spec.dtype],
            calibration_id=stored.id,
            bandwidth_bytes_per_s=ds,
        )
        bounds = link.plan(body).get("bounds") or {}
        calibrated = bounds.get("calibrated") or {}
        if "decode_step_seconds" not in calibrated:
            raise PlannerError(f"the plan for batch {point[0]} x {point[1]} has no calibrated step")
        kv = plan.spec.kv_bytes(*point)
        planned_kv = float(bounds["kv_read_seconds"]) * float(bounds["bandwidth_bytes_per_s"])
        if not math.isclose(planned_kv, kv, rel_tol=1e-3):
            notes.append(
                f"kv_bytes_differ: at batch {point[0]} x {point[1]} the plan reads "
                f"{planned_kv:.0f} KV bytes, the model {kv}"
            )
        rows.append(
            {
                "timing": timing,
                "kv": kv,
                "bytes_only": float(calibrated["decode_step_seconds"]),
                "floor": float(bounds["decode_step_seconds"]),
                "floor_bw": float(bounds["bandwidth_bytes_per_s"]),
                # Once the planner adds a record's step terms itself, do not add them twice
                # (the probe record planned here has none, so today this is always False).
                "has_terms": calibrated.get("per_layer_overhead_seconds") is not None,
            }
        )
    training = set(plan.training)
    weights_seconds = run.weights_read_bytes / probe.copy_bandwidth_bytes_per_s
    fit = fit_step_terms(
        plan.spec.layers,
        run.parameters,
        [
            (r["timing"].batch, r["timing"].median, r["bytes_only"], weights_seconds)
            for r in rows
            if (r["timing"].batch, r["timing"].context_tokens) in training
        ],
    )
    terms = StepTerms(
        model=plan.spec.label,
        per_layer_overhead_seconds=min(fit.per_layer_overhead_seconds, 1.0),
        matmul_flops_per_s=fit.matmul_flops_per_s,
        training_points=len(plan.training),
        clamped=list(fit.clamped),
    )
    final = probe.model_copy(
        update={
            "per_layer_overhead_seconds": terms.per_layer_overhead_seconds,
            "matmul_flops_per_s": terms.matmul_flops_per_s,
            "step_terms": terms,
        }
    )
    out: list[ValidationPoint] = []
    for r in rows:
        t = r["timing"]
        m = t.median
        cal = (
            r["bytes_only"]
            if r["has_terms"]
            else step_seconds(
                r["bytes_only"],
                weights_seconds,
                layers=plan.spec.layers,
                parameters=run.parameters,
                batch=t.batch,
                per_layer_overhead_seconds=final.per_layer_overhead_seconds,
                matmul_flops_per_s=final.matmul_flops_per_s,
            )
        )
        kv_part = plan.spec.layers * probe.fixed_overhead_seconds + r["kv"] / (
            probe.decode_bandwidth_bytes_per_s
        )
        kv_share = min(kv_part / m, 1e3)
        out.append(
            ValidationPoint(
                batch=t.batch,
                context_tokens=t.context_tokens,
                role="training" if (t.batch, t.context_tokens) in training else "held_out",
                measured_seconds=m,
                measured_best_seconds=t.best,
                coefficient_of_variation=min(t.coefficient_of_variation, 1e3),
                pass_spread=min(t.pass_spread, 1e3),
                samples=len(t.per_step_seconds),
                kv_read_bytes=r["kv"],
                weights_read_bytes=run.weights_read_bytes,
                bytes_only_seconds=r["bytes_only"],
                calibrated_seconds=cal,
                floor_seconds=r["floor"],
                bytes_only_error=_err(r["bytes_only"], m),
                calibrated_error=_err(cal, m),
                floor_error=_err(r["floor"], m),
                kv_share=kv_share,
                non_kv_share=max(0.0, 1.0 - kv_share),
                residual_seconds=m - r["bytes_only"],
            )
        )
    held = [p for p in out if p.role == "held_out"]
    med, mx = _abs_stats([p.calibrated_error for p in held])
    bmed, bmx = _abs_stats([p.bytes_only_error for p in held])
    fmed, _ = _abs_stats([p.floor_error for p in held])
    floor_label = (
        f"datasheet ({probe.datasheet_source})"
        if ds
        else "measured copy ceiling (no datasheet figure for this device)"
    )
    summary = ValidationSummary(
        model=plan.spec.label,
        framework=run.framework[:200],
        dtype=plan.spec.dtype,
        device=run.device,
        threads=run.threads,
        launch_mode=run.launch_mode,
        layers=plan.spec.layers,
        parameters=run.parameters,
        weights_read_bytes=run.weights_read_bytes,
        plan_path=link.path[:200],
        plan_calibration_id=stored.id,
        floor_label=floor_label[:200],
        floor_bandwidth_bytes_per_s=rows[0]["floor_bw"],
        points=out,
        median_abs_error=med,
        max_abs_error=mx,
        bytes_only_median_abs_error=bmed,
        bytes_only_max_abs_error=bmx,
        floor_median_abs_error=fmed,
        duration_seconds=min(time.monotonic() - started, 3600.0),
    )
    clamp_note = f" (clamped to 0: {', '.join(fit.clamped)})" if fit.clamped else ""
    flops = (
        f"{terms.matmul_flops_per_s / 1e9:.1f} GFLOP/s"
        if terms.matmul_flops_per_s
        else "none (dropped)"
    )
    notes.append(
        f"step_terms: fitted on {len(plan.training)} training points of {plan.spec.label}: "
        f"{terms.per_layer_overhead_seconds * 1e6:.1f} us per layer, matmul rate {flops}"
        f"{clamp_note}; held-out median |error| {med:.1%}, max {mx:.1%} "
        f"(bytes only: {bmed:.1%}, {bmx:.1%})"
    )
    record = final.model_copy(
        update={
            "validation": summary,
            "notes": [n[:500] for n in dict.fromkeys([*probe.notes, *notes])][-32:],
            "flags": list(dict.fromkeys([*probe.flags, "validated"]))[:32],
        }
    )
    # Re-validate: model_copy does not check the bounds of the new fields.
    return ValidationResult(stored, link.add(CalibrationIn.model_validate(record.model_dump())))


# --- presentation ---------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def validation_table(v: ValidationSummary) -> list[str]:
    """The predicted-vs-measured table as Markdown (README and terminal alike)."""
    lines = [
        "| point (batch × context) | role | measured | calibrated | error | bytes only | error "
        "| floor | error | non-KV share |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in v.points:
        lines.append(
            f"| {p.batch} × {p.context_tokens} | {p.role.replace('_', '-')} "
            f"| {_ms(p.measured_seconds)} | {_ms(p.calibrated_seconds)} "
            f"| {_pct(p.calibrated_error)} | {_ms(p.bytes_only_seconds)} "
            f"| {_pct(p.bytes_only_error)} | {_ms(p.floor_seconds)} | {_pct(p.floor_error)} "
            f"| {p.non_kv_share:.0%} |"
        )
    return lines


def validation_lines(c: CalibrationIn) -> list[str]:
    v = c.validation
    if v is None:
        return []
    terms = c.step_terms
    lines = [
        f"validation: {v.model}, {v.framework}, {v.device}"
        + (f" ({v.threads} thread{'s' if v.threads != 1 else ''})" if v.threads else "")
        + f", {v.launch_mode}",
        f"  planned through {v.plan_path} (calibration {v.plan_calibration_id}); floor: "
        f"{v.floor_label}",
    ]
    if terms is not None:
        flops = (
            f"{terms.matmul_flops_per_s / 1e9:.1f} GFLOP/s" if terms.matmul_flops_per_s else "none"
        )
        lines.append(
            f"  step terms (fitted on {terms.training_points} training points): "
            f"{terms.per_layer_overhead_seconds * 1e6:.1f} us per layer, matmul {flops}"
            + (f", clamped: {', '.join(terms.clamped)}" if terms.clamped else "")
        )
    lines += ["", *validation_table(v), ""]
    lines.append(
        f"  held-out |error|: calibrated median {v.median_abs_error:.1%}, max "
        f"{v.max_abs_error:.1%}; bytes only median {v.bytes_only_median_abs_error:.1%}, max "
        f"{v.bytes_only_max_abs_error:.1%}; floor median {v.floor_median_abs_error:.1%}"
    )
    return lines
