"""The one GPU type the core plans for: from the catalog or from a request's custom object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# What a custom GPU gives, by the request's own field names.
_CUSTOM_FIELDS = (
    "name",
    "memory_bytes",
    "bandwidth_bytes_per_s",
    "bf16_dense_flops",
    "compute_capability",
    "fp8_dense_flops",
    "link_bandwidth_bytes_per_s",
    "link_latency_seconds",
)


@dataclass(frozen=True, slots=True)
class Gpu:
    id: str | None  # catalog id; None for a custom GPU
    name: str
    memory_bytes: int  # memory as torch sees it (what the engine's fractions apply to)
    bandwidth_bytes_per_s: float
    bf16_dense_flops: float | None = None
    # CUDA compute capability as vLLM compares it (major × 10 + minor: H100 90, A100 80);
    # None where unknown or not CUDA.
    compute_capability: int | None = None
    fp8_dense_flops: float | None = None
    # The GPU-to-GPU link tensor parallelism talks over: bytes/s one way per GPU (NVLink,
    # PCIe, Infinity Fabric) and one hop's latency; None where unknown.
    link_bandwidth_bytes_per_s: float | None = None
    link_latency_seconds: float | None = None
    link_name: str | None = None

    @classmethod
    def custom(cls, spec: Any) -> Gpu:
        """A request's custom GPU object (schema.GpuSpec: the same field names)."""
        return cls(None, **{f: getattr(spec, f) for f in _CUSTOM_FIELDS})

    @property
    def names(self) -> tuple[str, ...]:
        """Every name the GPU goes by (engines test device names, e.g. vLLM for "a100")."""
        return tuple(n for n in (self.id, self.name) if n)


__all__ = ["Gpu"]
