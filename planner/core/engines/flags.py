"""Engine hooks for the settings one engine alone takes (SGLang's start-up flags): the defaults
every other engine gets. SGLang overrides them (planner/core/engines/sglang)."""

from __future__ import annotations

from typing import Any, ClassVar, Self

from planner.core.capacity import Pool
from planner.core.errors import FieldError
from planner.core.hardware import Gpu
from planner.core.model import ModelShape
from planner.core.notes import Note

# Request fields that are SGLang flags of the same names.
SGLANG_FLAGS = (
    "enable_dp_attention",
    "chunked_prefill_size",
    "cuda_graph_max_bs",
    "max_total_tokens",
    "swa_full_tokens_ratio",
    "mamba_full_memory_ratio",
    "max_mamba_cache_size",
    "mamba_ssm_dtype",
)


class EngineFlags:
    __slots__ = ()
    label: ClassVar[str]
    takes_sglang_flags: ClassVar[bool] = False  # True where `for_request` reads SGLANG_FLAGS
    # Request fields its start-up argument dump prints under the same names (SGLang's
    # ServerArgs line): a reconciled log is planned with them (planner.core.reconcile_request).
    logged_flags: ClassVar[tuple[str, ...]] = ()
    # Whether scheduling and sampling run in compiled code (TensorRT-LLM's C++ batch manager):
    # the expected step then charges its own per-request cost (planner.core.step_constants).
    compiled_scheduler: ClassVar[bool] = False

    def for_request(self, req: Any) -> Self:
        """The engine with the request's engine-specific flags (SGLang's; others refuse them)."""
        for flag in SGLANG_FLAGS:
            if getattr(req, flag, None) is not None:
                raise FieldError(flag, "engine.sglang_flag_elsewhere", flag=flag, label=self.label)
        return self

    def pool_running_cap(self, pool: Pool, cap: int | None) -> int | None:
        """The running limit once the pool is built (SGLang's state slots cap it)."""
        return cap

    def pool_facts(self, pool: Pool) -> dict[str, int | None]:
        """The engine's second pools, as capacity fields (SGLang's SWA and state pools)."""
        return {}

    def longest_request(self, pool: Pool, max_len: int | None) -> int | None:
        """The longest request the engine states it admits, where it states one."""
        return None

    def context_length(self, shape: ModelShape, requested: int, allow_long: bool) -> int:
        """The model length under an explicit context_length (SGLang's --context-length)."""
        raise FieldError("context_length", "engine.context_length_elsewhere", label=self.label)

    def page_on_gpu(
        self, block: int, asked: int | None, shape: ModelShape, gpu: Gpu | None
    ) -> tuple[int, list[Note]]:
        """The page size once the GPU (its attention backend) is known."""
        return block, []


__all__ = ["SGLANG_FLAGS", "EngineFlags"]
