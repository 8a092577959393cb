"""Datasheet memory bandwidth for the device the probe runs on (decimal B/s).

Matched on the device name, memory size and SM count, so SKU variants (H100 SXM/PCIe/NVL) are
not confused. Values: the vendors' datasheets. The
measured figures win; this row only gives the ratio `measured / datasheet`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from planner.core.units import TB, GiB


@dataclass(frozen=True, slots=True)
class DatasheetRow:
    label: str
    pattern: str  # regex on the lower-cased device name
    bandwidth_bytes_per_s: float
    min_memory_bytes: int = 0
    max_memory_bytes: int = 1 << 50
    sm_count: int | None = None


_SOURCE = "vendor datasheets"

# First match wins: specific SKUs before the generic name.
_ROWS: tuple[DatasheetRow, ...] = (
    DatasheetRow("H200 141GB", r"\bh200\b", 4.8 * TB),
    DatasheetRow("H100 NVL", r"\bh100\b.*\bnvl\b", 3.9 * TB),
    DatasheetRow("H100 PCIe 80GB", r"\bh100\b.*\bpcie\b", 2.0 * TB),
    # "NVIDIA H100 80GB HBM3" is the SXM part; Meta's 2.4 TB/s variant cannot be told apart.
    DatasheetRow("H100 SXM 80GB", r"\bh100\b", 3.35 * TB, max_memory_bytes=90 * GiB),
    DatasheetRow("B200 (datasheet 8.0; bus width gives 7.67)", r"\bb200\b", 8.0 * TB),
    DatasheetRow("A100 80GB PCIe", r"\ba100\b.*\bpcie\b", 1.935 * TB, min_memory_bytes=60 * GiB),
    DatasheetRow("A100 80GB SXM", r"\ba100\b", 2.039 * TB, min_memory_bytes=60 * GiB),
    DatasheetRow("A100 40GB", r"\ba100\b", 1.555 * TB, max_memory_bytes=60 * GiB),
    DatasheetRow("L40S", r"\bl40s\b", 0.864 * TB),
    DatasheetRow("L40", r"\bl40\b", 0.864 * TB),
    DatasheetRow("RTX 6000 Ada", r"\brtx 6000 ada\b", 0.960 * TB),
    DatasheetRow("RTX A6000", r"\brtx a6000\b", 0.768 * TB),
    DatasheetRow("RTX 4090", r"\brtx 4090\b", 1.008 * TB),
    DatasheetRow("A10", r"\ba10\b", 0.600 * TB),
    DatasheetRow("L4", r"\bl4\b", 0.300 * TB),
    DatasheetRow("MI300X", r"\bmi300x\b", 5.3 * TB),
    DatasheetRow("MI325X", r"\bmi325x\b", 6.0 * TB),
)


def lookup(
    device_name: str, *, memory_bytes: int = 0, sm_count: int | None = None
) -> tuple[float, str] | None:
    """(bandwidth_bytes_per_s, source) for a device, or None when no row matches."""
    name = device_name.lower()
    for row in _ROWS:
        if not re.search(row.pattern, name):
            continue
        if memory_bytes and not (row.min_memory_bytes <= memory_bytes <= row.max_memory_bytes):
            continue
        if sm_count is not None and row.sm_count is not None and sm_count != row.sm_count:
            continue
        return row.bandwidth_bytes_per_s, f"{_SOURCE}: {row.label}"
    return None
