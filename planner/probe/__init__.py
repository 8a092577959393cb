"""Decode-bandwidth probe: measure a device's streaming ceiling and decode-attention BW_eff.

`run_probe(device, max_seconds)` returns a `CalibrationIn`; `planner.store` keeps it as a
`Calibration`. The CUDA backend imports torch lazily, so this package works without it.
"""

from typing import TYPE_CHECKING, Any

from planner.probe.backend import ProbeFailed, ProbeUnavailable
from planner.probe.model import (
    AttentionShape,
    Calibration,
    CalibrationIn,
    CalibrationList,
    ProbePoint,
    ProbeRequest,
)

if TYPE_CHECKING:
    from planner.probe.run import run_probe


def __getattr__(name: str) -> Any:
    # run_probe pulls in NumPy; import it on first use so `kvplan --help` stays fast.
    if name == "run_probe":
        from planner.probe.run import run_probe

        return run_probe
    raise AttributeError(f"module 'planner.probe' has no attribute {name!r}")


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
