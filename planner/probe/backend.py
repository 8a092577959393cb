"""What a backend (CPU, CUDA) hands to `run_probe`: measured cases plus what it knows of itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from planner.probe.model import AttentionShape, EnvValue
from planner.probe.timing import Case


class ProbeUnavailable(RuntimeError):
    """The requested backend cannot run here (no torch, no CUDA device, unsupported dtype)."""


class ProbeFailed(RuntimeError):
    """The probe ran but measured too little to report (budget too short, no usable sizes)."""


@dataclass(slots=True)
class BackendResult:
    device_kind: Literal["cuda", "cpu", "rocm", "other"]
    device_name: str
    backend: str
    dtype: str
    shape: AttentionShape
    read_cases: list[Case]
    copy_cases: list[Case]
    decode_cases: list[Case]
    # Last-level cache (CPU L3 / GPU L2) and the working set from which a point counts as DRAM.
    cache_bytes: int
    asymptotic_bytes: int
    resident_factor: int
    min_fit_bytes: int
    copy_byte_convention: str
    environment: dict[str, EnvValue] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    datasheet_bandwidth_bytes_per_s: float | None = None
    datasheet_source: str | None = None
    truncated: bool = False
