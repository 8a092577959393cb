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


def utc_now() -> datetime:
    return datetime.now(UTC)


def finite_or_none(x: float | None) -> float | None:
    """Drop non-finite values before they reach a bounded field."""
    return x if x is not None and math.isfinite(x) else None
