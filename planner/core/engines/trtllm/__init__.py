"""TensorRT-LLM (PyTorch backend): blocks of tokens_per_block, no null block, KV heads per rank
ceil(Hkv / tp), every layer full length unless KvCacheConfig.max_attention_window is set
(tensorrt_llm/_torch/pyexecutor/resource_manager.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from planner.core.capacity import BytesBudgetPool, Pool, full_stack, groups_of
from planner.core.engines.base import EXTRA_OPTIONS_FILE, Engine
from planner.core.engines.reads import LaunchSettings, Scheduling
from planner.core.engines.trtllm.logs import (
    LOG_EXAMPLE,
    LOG_HINTS,
    LOG_RULES,
    LOG_VERSION_MARKERS,
)
from planner.core.engines.versions import Releases
from planner.core.errors import FieldError
from planner.core.hardware import Gpu
from planner.core.model import ModelShape
from planner.core.notes import Note, note
from planner.core.specs import Stack, WindowPolicy, cdiv
from planner.core.units import KVDtype


@dataclass(frozen=True, slots=True)
class BlockPool(Pool):
    """Full-length layers: a request needs cdiv(ctx, bs) blocks per distinct spec."""

    def blocks_per_request(self, ctx: int) -> int:
        return sum(cdiv(ctx, g.block_size) for g in self.groups)


@dataclass(frozen=True, slots=True)
class CyclicPool(BytesBudgetPool):
    """Windowed layers keep a cyclic buffer: admission by bytes, not by a shared block count."""

    def blocks_per_request(self, ctx: int) -> int:
        return sum(g.spec.cyclic_blocks(ctx, g.block_size) for g in self.groups)

    def request_bytes(self, ctx: int) -> int:
        return sum(
            g.spec.cyclic_blocks(ctx, g.block_size)
            * g.block_size
            * g.spec.bytes_per_token(self.dtype)
            * g.layers
            for g in self.groups
        )


@dataclass(frozen=True)
class Trtllm(Engine):
    name: ClassVar[str] = "trtllm"
    label: ClassVar[str] = "TensorRT-LLM"
    releases: ClassVar[Releases] = Releases(first=(1, 0, 0), last=(1, 4, 0), default=(1, 4, 0))
    default_block_size: ClassVar[int] = 32
    memory_base = "free_after_load"
    memory_fraction_flag: ClassVar[str] = "free_gpu_memory_fraction"
    running_cap_flag: ClassVar[str] = "max_batch_size"
    pp_extra_layers = "first"
    takes_max_attention_window: ClassVar[bool] = True
    compiled_scheduler: ClassVar[bool] = True
    kv_cache_dtypes: ClassVar[tuple[str, ...]] = (
        "auto", "fp32", "fp16", "bf16", "fp8", "fp8_e4m3", "int8", "int4",
    )  # fmt: skip

    def default_memory_utilization(self) -> float:
        return 0.9

    log_block_keys: ClassVar[tuple[str, ...]] = ("tokens_per_block",)
    fraction_setting: ClassVar[str] = "free_gpu_memory_fraction"
    log_fraction_keys: ClassVar[tuple[str, ...]] = (
        "kv_cache_free_gpu_memory_fraction", "free_gpu_memory_fraction",
    )  # fmt: skip

    log_rules = LOG_RULES
    log_hints = LOG_HINTS
    log_version_markers = LOG_VERSION_MARKERS
    log_example = LOG_EXAMPLE

    def rule_notes(self) -> list[Note]:
        return [
            note("engine.trtllm.rules"),
            note("engine.trtllm.memory_fraction", default=self.default_memory_utilization()),
        ]

    def validate_kv_heads(self, hkv: int, hq: int, tp: int) -> None:
        return None  # the allocator rounds heads up: ceil(Hkv / tp) per rank

    def kv_heads_per_rank(self, kv_heads: int, tp: int) -> int:
        return cdiv(kv_heads, tp)

    def parallel_notes(self, shape: ModelShape, tp: int, dtype: KVDtype) -> list[Note]:
        if shape.is_mla or tp <= shape.num_key_value_heads:
            return []
        # The memory estimator divides head_dim × Hkv by tp; the allocator rounds heads up.
        est = sum(
            n * 2 * (x.head_size * x.kv_heads // tp) * dtype.bits // 8 for x, n in shape.stack
        )
        return [note("parallel.trtllm_estimator", estimate=est)]

    def validate_memory_fraction(self, fraction: float) -> None:
        if fraction >= 1:
            # KVCacheManager.calculate_max_num_blocks asserts free_mem_fraction < 1.0.
            raise FieldError(
                "gpu_memory_utilization",
                "trtllm.memory_fraction_below_1",
                label=self.label,
                fraction=fraction,
            )

    def window_policy(
        self, shape: ModelShape, *, hybrid_manager: bool, explicit_windows: bool
    ) -> WindowPolicy:
        # Without max_attention_window the PyTorch backend sizes every layer for max_seq_len
        # (only some models fill the windows in); explicit windows make the layers cyclic.
        return "cyclic" if explicit_windows else "full_length"

    def window_notes(
        self, policy: WindowPolicy, sched: Scheduling, shape: ModelShape, hybrid_manager: bool
    ) -> list[Note]:
        if policy == "full_length":
            return [note("window.trtllm_full_length")]
        return [note("window.trtllm_cyclic")]

    def default_max_num_seqs(self, gpu: Gpu | None, pool_tokens: int, ctx: int) -> int | None:
        return 2048  # LLM API max_batch_size

    launch_kv_dtypes: ClassVar[dict[str, str]] = {"fp8": "fp8", "fp8_e4m3": "fp8"}

    def launch(self, model: str, s: LaunchSettings, instances: int) -> tuple[str, dict[str, str]]:
        # KV dtype and tokens_per_block go in the LLM API options file.
        parts = [
            f"trtllm-serve {model}",
            f"--tp_size {s.tensor_parallel_size}",
            f"--max_batch_size {s.max_num_seqs}",
            f"--max_seq_len {s.max_model_len}",
            f"--kv_cache_free_gpu_memory_fraction {s.gpu_memory_utilization:g}",
        ]
        files: dict[str, str] = {}
        if s.kv_cache_dtype != "auto" or s.block_size != self.default_block_size:
            files[EXTRA_OPTIONS_FILE] = (
                f"kv_cache_config:\n  dtype: {s.kv_cache_dtype}\n  tokens_per_block: "
                f"{s.block_size}\n"
            )
            parts.append(f"--extra_llm_api_options {EXTRA_OPTIONS_FILE}")
        return " ".join(parts), files

    def replicas_note(self, instances: int, tp: int) -> Note | None:
        return note("engine.trtllm.replicas", instances=instances, tp=tp)

    def stage_pool(
        self, stack: Stack, dtype: KVDtype, block: int, policy: WindowPolicy, budget_bytes: int
    ) -> Pool:
        per_token = sum(n * s.bytes_per_token(dtype) for s, n in stack)
        blocks = (budget_bytes // per_token if per_token else 0) // block
        if policy == "cyclic" and any(s.is_window for s, _ in stack):
            return CyclicPool(
                groups_of(stack, block), blocks, 0, block, stack, dtype, policy, budget_bytes
            )
        sized = full_stack(stack)
        return BlockPool(
            groups_of(sized, block), blocks, 0, block, sized, dtype, "full_length", budget_bytes
        )


__all__ = ["BlockPool", "CyclicPool", "Trtllm"]
