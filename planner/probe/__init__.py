"""Decode-bandwidth probe: measure a device's streaming ceiling and decode-attention BW_eff.

`run_probe(device, max_seconds)` returns a `CalibrationIn`; `planner.store` keeps it as a
`Calibration`. The CUDA backend imports torch lazily, so this package works without it.
"""

from planner.probe.backend import ProbeFailed, ProbeUnavailable
from planner.probe.model import (
    AttentionShape,
    Calibration,
    CalibrationIn,
    CalibrationList,
    ProbePoint,
    ProbeRequest,
)
from planner.probe.run import run_probe

__all__ = [
    "AttentionShape",
    "Calibration",
    "CalibrationIn",
    "CalibrationList",
    "ProbeFailed",
    "ProbePoint",
    "ProbeRequest",
    "ProbeUnavailable",
    "run_probe",
]
