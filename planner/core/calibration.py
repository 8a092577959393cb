"""What `plan()` reads from a stored probe result (planner.probe, planner.store): a protocol,
so the core never imports the store or the probe's models."""

from __future__ import annotations

from typing import Any, Protocol


class CalibrationLike(Protocol):
    """What `plan()` needs from a stored probe result (planner.probe / planner.store)."""

    @property
    def id(self) -> Any: ...
    @property
    def device_name(self) -> str: ...
    @property
    def measured_at(self) -> Any: ...
    @property
    def decode_bandwidth_bytes_per_s(self) -> float: ...
    @property
    def copy_bandwidth_bytes_per_s(self) -> float: ...
    @property
    def fixed_overhead_seconds(self) -> float: ...
    # Step terms of a validated record (kvplan probe --validate); None on a plain probe record.
    @property
    def per_layer_overhead_seconds(self) -> float | None: ...
    @property
    def matmul_flops_per_s(self) -> float | None: ...


__all__ = ["CalibrationLike"]
