"""Calibration records: what a probe reports, what the store keeps, what the API accepts.

`CalibrationIn` is the ingest contract (a record measured elsewhere, or the probe's own result
before it is stored); `Calibration` is a stored record (adds `id`, makes `measured_at` required).
Bandwidths are decimal bytes per second (10**12 B/s = 1 TB/s); sizes are integer bytes.
Every number is bounded so that a hostile or broken probe cannot store inf, NaN or 1e308.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

# 1 PB/s is ~100x any memory system that exists; a larger figure is a unit error.
MAX_BANDWIDTH_BYTES_PER_S = 1e15
MAX_OVERHEAD_SECONDS = 1.0
MAX_POINTS = 512
MAX_FLAGS = 32
MAX_NOTES = 32
MAX_ENV_KEYS = 96

Bandwidth = Annotated[float, Field(gt=0, le=MAX_BANDWIDTH_BYTES_PER_S, allow_inf_nan=False)]
Seconds = Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)]
Ratio = Annotated[float, Field(ge=0, le=1e3, allow_inf_nan=False)]
ByteCount = Annotated[int, Field(ge=0, le=1 << 50)]
ShortText = Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]
NoteText = Annotated[str, StringConstraints(min_length=1, max_length=500)]
FlagName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
EnvKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9_.\-]{0,63}$")]
EnvValue = (
    Annotated[str, StringConstraints(max_length=500)]
    | Annotated[int, Field(ge=-(1 << 62), le=1 << 62)]
    | Annotated[float, Field(allow_inf_nan=False)]
    | bool
    | None
)

DeviceKind = Literal["cuda", "cpu", "rocm", "other"]
PointKind = Literal["read", "copy", "decode"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AttentionShape(_Strict):
    """Decode attention at q_len = 1: query heads share KV heads in groups (GQA)."""

    num_q_heads: int = Field(32, ge=1, le=256)
    num_kv_heads: int = Field(8, ge=1, le=256)
    head_dim: int = Field(128, ge=8, le=512)

    @model_validator(mode="after")
    def _group_divides(self) -> AttentionShape:
        if self.num_q_heads % self.num_kv_heads:
            raise ValueError(
                f"num_q_heads ({self.num_q_heads}) must be a multiple of num_kv_heads "
                f"({self.num_kv_heads}); e.g. Llama-3.1-8B is 32 q heads over 8 KV heads"
            )
        return self

    @property
    def group_size(self) -> int:
        return self.num_q_heads // self.num_kv_heads


class ProbePoint(_Strict):
    """One measured size: logical bytes per call and the per-call times over all samples."""

    kind: PointKind
    bytes: ByteCount = Field(description="logical bytes one call moves (copy counts 2N)")
    working_set_bytes: ByteCount = Field(description="distinct bytes touched per rotation")
    seconds_median: Seconds
    seconds_best: Seconds
    coefficient_of_variation: Ratio
    pass_spread: Ratio = Field(0.0, description="(max - min) of per-pass medians / median")
    samples: int = Field(ge=1, le=1_000_000)
    bandwidth_bytes_per_s: Bandwidth = Field(description="bytes / seconds_median")
    batch: int | None = Field(None, ge=1, le=1 << 20)
    context_tokens: int | None = Field(None, ge=1, le=1 << 24)
    relative_residual: float | None = Field(None, ge=-1e3, le=1e3, allow_inf_nan=False)
    used_in_fit: bool = False


class PiecewiseFit(_Strict):
    """A fit over a sub-range, reported beside (never instead of) the main one."""

    min_bytes: ByteCount
    max_bytes: ByteCount
    fixed_overhead_seconds: Seconds
    decode_bandwidth_bytes_per_s: Bandwidth
    points_used: int = Field(ge=2, le=MAX_POINTS)


class FitSummary(_Strict):
    """`t = t0 + bytes / BW_eff` fitted over points with bytes >= min_bytes."""

    min_bytes: ByteCount
    points_used: int = Field(ge=0, le=MAX_POINTS)
    r_squared: float = Field(ge=-1e6, le=1, allow_inf_nan=False)
    max_abs_relative_residual: Ratio
    median_abs_relative_residual: Ratio
    piecewise: list[PiecewiseFit] = Field(default_factory=list, max_length=4)


class StepTerms(_Strict):
    """A model's decode step beyond bytes / BW: fitted from the validation's training points.

    The bytes-only estimate is `layers x t0 + KV bytes / BW_eff + weights / BW_copy`. A real
    step also runs norms, kernel launches, sampling, and matmuls whose compute can outlast the
    weight stream. Two terms cover that, fitted by relative-error least squares on training
    points only: a fixed cost per layer, and a matmul rate F, with the weights term becoming
    `max(weights / BW_copy, 2 x parameters x batch / F)`.
    """

    model: ShortText = Field(description="the model whose steps were timed, e.g. its shape")
    per_layer_overhead_seconds: Annotated[
        float, Field(ge=0, le=MAX_OVERHEAD_SECONDS, allow_inf_nan=False)
    ]
    matmul_flops_per_s: Annotated[float, Field(gt=0, le=1e18, allow_inf_nan=False)] | None = Field(
        None, description="None: no training point was matmul-bound (term dropped)"
    )
    training_points: int = Field(ge=1, le=MAX_POINTS)
    clamped: list[Annotated[str, StringConstraints(pattern=r"^[a-z_]{1,40}$")]] = Field(
        default_factory=list,
        max_length=2,
        description="terms that fitted negative and were set to 0 (none, or per_layer)",
    )


class ValidationPoint(_Strict):
    """One batch x context point: the measured step beside the planner's figures for it."""

    batch: int = Field(ge=1, le=1 << 20)
    context_tokens: int = Field(ge=1, le=1 << 24)
    role: Literal["training", "held_out"]
    measured_seconds: Seconds = Field(description="median step time (forward + greedy sampling)")
    measured_best_seconds: Seconds
    coefficient_of_variation: Ratio
    pass_spread: Ratio
    samples: int = Field(ge=1, le=1_000_000)
    kv_read_bytes: ByteCount = Field(description="KV bytes one step reads (the plan's figure)")
    weights_read_bytes: ByteCount
    bytes_only_seconds: Seconds = Field(
        description="the plan's calibrated estimate: layers x t0 + KV/BW_eff + weights/BW_copy"
    )
    calibrated_seconds: Seconds = Field(description="bytes_only_seconds + the fitted step terms")
    floor_seconds: Seconds = Field(description="the plan's bytes / bandwidth floor")
    bytes_only_error: float = Field(ge=-1e3, le=1e3, allow_inf_nan=False)
    calibrated_error: float = Field(
        ge=-1e3, le=1e3, allow_inf_nan=False, description="(estimate - measured) / measured"
    )
    floor_error: float = Field(ge=-1e3, le=1e3, allow_inf_nan=False)
    kv_share: Ratio = Field(description="(layers x t0 + KV/BW_eff) / measured")
    non_kv_share: Ratio = Field(
        description="1 - kv_share: weights, matmuls, norms, MLP, launches and sampling"
    )
    residual_seconds: float = Field(
        ge=-3600, le=3600, allow_inf_nan=False, description="measured - bytes_only_seconds"
    )


class ValidationSummary(_Strict):
    """Predicted vs measured decode steps of a real model (random weights, transformers)."""

    model: ShortText
    framework: ShortText = Field(description="e.g. transformers 5.24.0 / torch 2.13.0, sdpa")
    dtype: ShortText
    device: ShortText
    threads: int | None = Field(None, ge=1, le=4096)
    launch_mode: ShortText = Field(description="eager, or cuda_graph when the step was captured")
    layers: int = Field(ge=1, le=4096)
    parameters: int = Field(ge=1, le=1 << 50)
    weights_read_bytes: ByteCount = Field(
        description="parameters a step reads: all but an untied input embedding table"
    )
    plan_path: ShortText = Field(description="how the points were planned (POST /api/v1/plan)")
    plan_calibration_id: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_\-]{1,64}$")]
    floor_label: ShortText = Field(description="what the floor's bandwidth is")
    floor_bandwidth_bytes_per_s: Bandwidth
    points: list[ValidationPoint] = Field(max_length=MAX_POINTS)
    median_abs_error: Ratio = Field(description="held-out points, calibrated estimate")
    max_abs_error: Ratio
    bytes_only_median_abs_error: Ratio = Field(description="held-out points, no step terms")
    bytes_only_max_abs_error: Ratio
    floor_median_abs_error: Ratio
    duration_seconds: Seconds


class CalibrationIn(_Strict):
    """A calibration to store: the probe's result, or a record measured elsewhere (ingest)."""

    device_name: ShortText
    backend: ShortText = Field(description="kernel actually run, e.g. sdpa-flash, numpy-cpu")
    copy_bandwidth_bytes_per_s: Bandwidth = Field(
        description="streaming ceiling: read-only reduction, median over sizes >> last-level cache"
    )
    decode_bandwidth_bytes_per_s: Bandwidth = Field(description="BW_eff of the decode fit")
    fixed_overhead_seconds: Annotated[
        float, Field(ge=0, le=MAX_OVERHEAD_SECONDS, allow_inf_nan=False)
    ] = Field(description="t0 per attention call from the fit (0 if the fit clamped it)")

    measured_at: datetime | None = None
    device_kind: DeviceKind | None = None
    dtype: ShortText | None = None
    attention_shape: AttentionShape | None = None
    copy_bandwidth_best_bytes_per_s: Bandwidth | None = None
    copy_byte_convention: ShortText | None = None
    half_performance_bytes: Annotated[float, Field(ge=0, le=1e15, allow_inf_nan=False)] | None = (
        None
    )
    datasheet_bandwidth_bytes_per_s: Bandwidth | None = None
    datasheet_source: ShortText | None = None
    copy_to_datasheet_ratio: Ratio | None = None
    decode_to_datasheet_ratio: Ratio | None = None
    decode_to_copy_ratio: Ratio | None = None
    fit: FitSummary | None = None
    points: list[ProbePoint] = Field(default_factory=list, max_length=MAX_POINTS)
    flags: list[FlagName] = Field(default_factory=list, max_length=MAX_FLAGS)
    notes: list[NoteText] = Field(default_factory=list, max_length=MAX_NOTES)
    environment: dict[EnvKey, EnvValue] = Field(default_factory=dict, max_length=MAX_ENV_KEYS)
    duration_seconds: Seconds | None = None
    # A real model's step beyond bytes / BW (issue 17); absent on plain probe records.
    per_layer_overhead_seconds: (
        Annotated[float, Field(ge=0, le=MAX_OVERHEAD_SECONDS, allow_inf_nan=False)] | None
    ) = Field(None, description="fixed cost per layer beyond t0 (norms, launches, MLP glue)")
    matmul_flops_per_s: Annotated[float, Field(gt=0, le=1e18, allow_inf_nan=False)] | None = Field(
        None,
        description="matmul rate at decode batches: the weights term is "
        "max(weights / BW_copy, 2 x params x batch / this)",
    )
    step_terms: StepTerms | None = None
    validation: ValidationSummary | None = None

    @model_validator(mode="after")
    def _measured_at_is_aware(self) -> CalibrationIn:
        if self.measured_at is not None and self.measured_at.tzinfo is None:
            raise ValueError("measured_at needs a timezone, e.g. 2025-01-31T12:00:00Z")
        return self


class Calibration(CalibrationIn):
    """A stored calibration: `id` and `measured_at` are always present."""

    id: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_\-]{1,64}$")]
    measured_at: datetime


class CalibrationList(_Strict):
    items: list[Calibration]
    limit: int
    offset: int


class ProbeRequest(_Strict):
    """Body of `POST /api/v1/probe`: every knob bounded in time and memory."""

    device: Literal["auto", "cuda", "cpu"] = "auto"
    max_seconds: float = Field(30.0, gt=0, le=120, allow_inf_nan=False)
    max_memory_bytes: int | None = Field(
        None,
        ge=64 << 20,
        le=16 << 30,
        description="cap on probe buffers; default 25% of free memory (and 16 GiB)",
    )
    attention_shape: AttentionShape = Field(default_factory=AttentionShape)
    dtype: Literal["bf16", "fp16", "fp8"] = "bf16"
    validate_model: bool = Field(
        False,
        alias="validate",
        description="also time a real model's decode steps (random weights) and store the "
        "calibration with fitted step terms and the predicted-vs-measured table",
    )


def utc_now() -> datetime:
    return datetime.now(UTC)


def finite_or_none(x: float | None) -> float | None:
    """Drop non-finite values before they reach a bounded field."""
    return x if x is not None and math.isfinite(x) else None
