"""`run_probe`: pick a backend, measure, fit, and return a `CalibrationIn` ready to store."""

from __future__ import annotations

import time
from typing import Literal

from planner.probe.backend import BackendResult, ProbeFailed, ProbeUnavailable
from planner.probe.cpu import CpuConfig, probe_cpu
from planner.probe.cuda import CudaConfig, cuda_available, probe_cuda
from planner.probe.fit import (
    AffineFit,
    FitError,
    TimedPoint,
    assess,
    ceiling,
    fit_affine,
    piecewise_fits,
)
from planner.probe.model import (
    AttentionShape,
    CalibrationIn,
    FitSummary,
    PiecewiseFit,
    ProbePoint,
    utc_now,
)
from planner.probe.timing import Case, Deadline

Device = Literal["auto", "cuda", "cpu"]
# Setup (allocation, first touch, backend trial) runs outside the timed sweeps; keep room for it.
_SWEEP_SHARE = 0.8
_MIN_SECONDS = 1e-12


def run_probe(
    device: Device = "auto",
    max_seconds: float = 30.0,
    *,
    shape: AttentionShape | None = None,
    dtype: Literal["bf16", "fp16", "fp8"] = "bf16",
    max_memory_bytes: int | None = None,
    datasheet_bandwidth_bytes_per_s: float | None = None,
    cpu_config: CpuConfig | None = None,
    cuda_config: CudaConfig | None = None,
) -> CalibrationIn:
    """Measure this host and return the calibration (not yet stored: no id).

    Raises ProbeUnavailable when the asked backend cannot run here, ProbeFailed when the budget
    was too short to measure enough sizes.
    """
    if not max_seconds > 0:
        raise ValueError("max_seconds must be > 0")
    shape = shape or AttentionShape()
    started = time.monotonic()
    deadline = Deadline(max_seconds * _SWEEP_SHARE)
    notes: list[str] = []
    if device == "auto":
        device = "cuda" if cuda_available() else "cpu"
        found = "a CUDA device was found" if device == "cuda" else "no CUDA device: CPU figures"
        notes.append(f"device auto: {found}")
    if device == "cuda":
        result = probe_cuda(
            shape, deadline, dtype=dtype, max_memory_bytes=max_memory_bytes, config=cuda_config
        )
    elif device == "cpu":
        result = probe_cpu(shape, deadline, max_memory_bytes=max_memory_bytes, config=cpu_config)
    else:
        raise ProbeUnavailable(f"unknown device {device!r}; use auto, cuda or cpu")
    if datasheet_bandwidth_bytes_per_s is not None:
        result.datasheet_bandwidth_bytes_per_s = datasheet_bandwidth_bytes_per_s
        result.datasheet_source = "given by the caller"
    calibration = calibrate(result, extra_notes=notes)
    return calibration.model_copy(update={"duration_seconds": time.monotonic() - started})


def _timed(case: Case) -> TimedPoint:
    p = case.summary()
    if p.seconds < _MIN_SECONDS:  # a timer that did not tick: keep the point finite
        return TimedPoint(
            p.bytes,
            _MIN_SECONDS,
            p.coefficient_of_variation,
            p.pass_spread,
            p.working_set_bytes,
            _MIN_SECONDS,
        )
    return p


def _point(case: Case, timed: TimedPoint, residual: float | None) -> ProbePoint:
    return ProbePoint(
        kind=case.kind,
        bytes=case.bytes,
        working_set_bytes=case.working_set_bytes,
        seconds_median=timed.seconds,
        seconds_best=timed.seconds_best or timed.seconds,
        coefficient_of_variation=min(timed.coefficient_of_variation, 1e3),
        pass_spread=min(timed.pass_spread, 1e3),
        samples=len(case.per_call_seconds),
        bandwidth_bytes_per_s=case.bytes / timed.seconds,
        batch=case.batch,
        context_tokens=case.context_tokens,
        relative_residual=residual,
        used_in_fit=residual is not None,
    )


def calibrate(result: BackendResult, *, extra_notes: list[str] | None = None) -> CalibrationIn:
    """Turn a backend's measured cases into a calibration: ceiling, fit, ratios, flags."""
    flags = list(result.flags)
    notes = [*(extra_notes or []), *result.notes]
    measured = [c for c in (*result.read_cases, *result.copy_cases) if c.per_call_seconds]
    reads = [c for c in result.read_cases if c.per_call_seconds]
    decodes = [c for c in result.decode_cases if c.per_call_seconds]
    if not reads or not decodes:
        raise ProbeFailed(
            f"the budget ran out before enough sizes were measured ({len(reads)} read, "
            f"{len(decodes)} decode); raise max_seconds"
        )
    read_points = [_timed(c) for c in reads]
    copy_bw, copy_best, copy_small = ceiling(read_points, asymptotic_bytes=result.asymptotic_bytes)
    if copy_small:
        flags.append("small_size_only")
        notes.append(
            "copy ceiling measured below the asymptotic size "
            f"({result.asymptotic_bytes} bytes): raise the memory cap"
        )
    # Only the sizes that define the ceiling are checked for cache residency; the small read
    # sizes are there to draw the curve.
    ceiling_points = [p for p in read_points if p.working_set_bytes >= result.asymptotic_bytes] or [
        max(read_points, key=lambda p: p.bytes)
    ]
    ceiling_points += [_timed(c) for c in result.copy_cases if c.per_call_seconds]
    decode_points = [_timed(c) for c in decodes]
    residuals: dict[int, float] = {}
    fit: AffineFit | None
    try:
        fit = fit_affine(decode_points, min_bytes=result.min_fit_bytes)
    except FitError as exc:
        fit = None
        flags.append("fit_failed")
        notes.append(f"fit_failed: {exc}; BW_eff is the largest size's rate and t0 is 0")
    if fit is not None:
        used = [i for i, p in enumerate(decode_points) if p.bytes >= fit.min_bytes]
        residuals = dict(zip(used, fit.relative_residuals, strict=True))
        decode_bw, t0 = fit.bandwidth_bytes_per_s, fit.fixed_overhead_seconds
        assessment = assess(
            fit,
            decode_points,
            copy_bandwidth_bytes_per_s=copy_bw,
            copy_points=ceiling_points,
            datasheet_bandwidth_bytes_per_s=result.datasheet_bandwidth_bytes_per_s,
            cache_bytes=result.cache_bytes,
            resident_factor=result.resident_factor,
        )
        flags.extend(assessment.flags)
        notes.extend(assessment.notes)
        pieces = piecewise_fits(decode_points, fit)
        summary: FitSummary | None = FitSummary(
            min_bytes=fit.min_bytes,
            points_used=fit.points_used,
            r_squared=max(fit.r_squared, -1e6),
            max_abs_relative_residual=min(fit.max_abs_relative_residual, 1e3),
            median_abs_relative_residual=min(fit.median_abs_relative_residual, 1e3),
            piecewise=[
                PiecewiseFit(
                    min_bytes=f.min_bytes,
                    max_bytes=max(p.bytes for p in decode_points if p.bytes >= f.min_bytes),
                    fixed_overhead_seconds=f.fixed_overhead_seconds,
                    decode_bandwidth_bytes_per_s=f.bandwidth_bytes_per_s,
                    points_used=f.points_used,
                )
                for f in pieces
            ],
        )
        half = fit.half_performance_bytes
    else:
        biggest = max(decode_points, key=lambda p: p.bytes)
        decode_bw, t0, summary, half = biggest.bytes / biggest.seconds, 0.0, None, None
    if result.truncated:
        flags.append("budget_truncated")
        notes.append("budget_truncated: the time budget ended before every pass completed")
    ds = result.datasheet_bandwidth_bytes_per_s
    points = [
        *(_point(c, _timed(c), None) for c in measured),
        *(
            _point(c, p, residuals.get(i))
            for i, (c, p) in enumerate(zip(decodes, decode_points, strict=True))
        ),
    ]
    return CalibrationIn(
        device_name=result.device_name[:200],
        backend=result.backend,
        copy_bandwidth_bytes_per_s=copy_bw,
        decode_bandwidth_bytes_per_s=decode_bw,
        fixed_overhead_seconds=t0,
        measured_at=utc_now(),
        device_kind=result.device_kind,
        dtype=result.dtype,
        attention_shape=result.shape,
        copy_bandwidth_best_bytes_per_s=copy_best,
        copy_byte_convention=result.copy_byte_convention,
        half_performance_bytes=half,
        datasheet_bandwidth_bytes_per_s=ds,
        datasheet_source=result.datasheet_source,
        copy_to_datasheet_ratio=copy_bw / ds if ds else None,
        decode_to_datasheet_ratio=decode_bw / ds if ds else None,
        decode_to_copy_ratio=decode_bw / copy_bw,
        fit=summary,
        points=points,
        flags=list(dict.fromkeys(flags)),
        notes=[n[:500] for n in dict.fromkeys(notes)],
        environment=result.environment,
    )
