"""The one GPU type the core plans for: from the catalog or from a request's custom object."""

from __future__ import annotations

from dataclasses import dataclass


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

    @property
    def names(self) -> tuple[str, ...]:
        """Every name the GPU goes by (engines test device names, e.g. vLLM for "a100")."""
        return tuple(n for n in (self.id, self.name) if n)


__all__ = ["Gpu"]
