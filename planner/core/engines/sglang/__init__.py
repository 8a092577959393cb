"""SGLang: a token pool (page_size 1 by default), and hybrid SWA pools for the architectures that
have them (python/sglang/srt/mem_cache/memory_pool.py, model_executor/model_runner.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from planner.core.budget.terms import BudgetTerms, StartVerdict
from planner.core.capacity import Pool, full_stack, groups_of
from planner.core.engines.base import Engine
from planner.core.engines.reads import LaunchSettings, PlanInputs, Scheduling
from planner.core.engines.sglang.budget import sglang_budget, sglang_start_check
from planner.core.engines.sglang.logs import (
    LOG_EXAMPLE,
    LOG_HINTS,
    LOG_RULES,
    LOG_VERSION_MARKERS,
)
from planner.core.engines.versions import Releases
from planner.core.hardware import Gpu
from planner.core.model import ModelShape
from planner.core.notes import Note, note
from planner.core.specs import LayerSpec, WindowPolicy, cdiv
from planner.core.units import KVDtype

# SGLang applies SWA pools only to these architectures (`is_hybrid_swa_model`).
_SWA_TYPES = {"llama4", "llama4_text", "gpt_oss", "mimo_v2", "step3p5"}
# swa_full_tokens_ratio: the SWA pool holds 0.8 × the full pool's tokens.
SWA_FULL_TOKENS_RATIO = 0.8


@dataclass(frozen=True, slots=True)
class TokenPool(Pool):
    """SGLang's token pool: max_total_num_tokens slots in pages of `unit_tokens`."""

    def blocks_per_request(self, ctx: int) -> int:
        return cdiv(ctx, self.unit_tokens)

    def closed_form_longest(self) -> int | None:
        return self.usable_blocks * self.unit_tokens


@dataclass(frozen=True, slots=True)
class SwaTokenPool(TokenPool):
    """HybridSWAPoolConfigurator: a full pool and an SWA pool of `swa_pool_tokens` slots."""

    shares_prefix: ClassVar[bool] = False

    swa_pool_tokens: int = 0

    def _swa_tokens_needed(self, ctx: int) -> int:
        """SWA-pool slots one request holds: the window (for Llama-4 the attention chunk) in
        whole pages, since the SWA allocator hands out pages."""
        kept = max(
            (min(ctx, g.spec.window_tokens or ctx) for g in self.groups if g.spec.is_window),
            default=0,
        )
        return cdiv(kept, self.unit_tokens) * self.unit_tokens

    def max_requests(self, ctx: int) -> int:
        usable = self.usable_blocks
        if usable <= 0:
            return 0
        full_fit = usable // cdiv(ctx, self.unit_tokens)
        swa_need = self._swa_tokens_needed(ctx)
        swa_fit = self.swa_pool_tokens // swa_need if swa_need else full_fit
        return min(full_fit, swa_fit)

    def fits(self, workload: Sequence[tuple[int, int]], shared_tokens: Sequence[int] = ()) -> bool:
        full = sum(n * cdiv(c, self.unit_tokens) for c, n in workload)
        swa_need = sum(n * self._swa_tokens_needed(c) for c, n in workload)
        return full <= self.num_blocks and swa_need <= self.swa_pool_tokens

    def closed_form_longest(self) -> int | None:
        return None


@dataclass(frozen=True)
class Sglang(Engine):
    name: ClassVar[str] = "sglang"
    label: ClassVar[str] = "SGLang"
    releases: ClassVar[Releases] = Releases(first=(0, 5, 0), last=(0, 5, 0), default=(0, 5, 0))
    default_block_size: ClassVar[int] = 1
    memory_base = "free_before_load"
    memory_fraction_flag: ClassVar[str] = "--mem-fraction-static"
    running_cap_flag: ClassVar[str] = "--max-running-requests"
    prefix_granularity = "token"
    limited_by_memory: ClassVar[str] = "kv_tokens"
    long_context_override: ClassVar[str | None] = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
    pp_extra_layers = "last"
    kv_cache_dtypes: ClassVar[tuple[str, ...]] = (
        "auto", "fp32", "fp16", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2",
    )  # fmt: skip

    def default_memory_utilization(self) -> float:
        return 0.88

    log_block_keys: ClassVar[tuple[str, ...]] = ("page_size",)
    fraction_setting: ClassVar[str] = "mem_fraction_static"
    log_fraction_keys: ClassVar[tuple[str, ...]] = ("mem_fraction_static",)
    fraction_default_known: ClassVar[bool] = False

    log_rules = LOG_RULES
    log_hints = LOG_HINTS
    log_version_markers = LOG_VERSION_MARKERS
    log_example = LOG_EXAMPLE

    def rule_notes(self) -> list[Note]:
        return [
            note("engine.sglang.rules"),
            note("engine.sglang.memory_fraction", default=self.default_memory_utilization()),
        ]

    def derive_budget(self, inp: PlanInputs, weights_per_rank: int) -> BudgetTerms:
        """mem_fraction_static of the memory free before load, less the weights
        (ModelRunner.profile_max_num_token)."""
        assert inp.gpu is not None
        req = inp.request
        return sglang_budget(
            total_memory_bytes=inp.gpu.memory_bytes,
            weights_bytes_per_rank=weights_per_rank,
            mem_fraction_static=req.gpu_memory_utilization or self.default_memory_utilization(),
            tensor_parallel_size=inp.tp,
            pipeline_parallel_size=inp.pp,
            engine_version=self.version_text,
            reserve_bytes=req.reserve_bytes,
        )

    def start_check(
        self, inp: PlanInputs, kv_budget_bytes: int, terms: BudgetTerms | None, pool: Pool
    ) -> StartVerdict:
        if terms is not None:
            return sglang_start_check(budget=terms)
        return super().start_check(inp, kv_budget_bytes, terms, pool)

    def window_policy(
        self, shape: ModelShape, *, hybrid_manager: bool, explicit_windows: bool
    ) -> WindowPolicy:
        return "sglang_swa_pool" if shape.model_type in _SWA_TYPES else "full_length"

    def window_notes(
        self, policy: WindowPolicy, sched: Scheduling, shape: ModelShape, hybrid_manager: bool
    ) -> list[Note]:
        if policy == "sglang_swa_pool":
            return [note("window.sglang_swa_pool")]
        return [note("window.full_length_arch", engine=self.label)]

    def default_max_num_seqs(self, gpu: Gpu | None, pool_tokens: int, ctx: int) -> int | None:
        """max_running_requests = min(clamp(pool tokens / context length × 512, 2048, 4096),
        pool tokens // 2)."""
        scaled = int(pool_tokens / max(1, ctx) * 512)
        return max(1, min(max(2048, min(scaled, 4096)), pool_tokens // 2))

    launch_kv_dtypes: ClassVar[dict[str, str]] = {
        "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2", "bf16": "bfloat16",
    }  # fmt: skip

    def launch(self, model: str, s: LaunchSettings, instances: int) -> tuple[str, dict[str, str]]:
        parts = [
            f"python -m sglang.launch_server --model-path {model}",
            f"--tp {s.tensor_parallel_size}",
            f"--mem-fraction-static {s.gpu_memory_utilization:g}",
            f"--max-running-requests {s.max_num_seqs}",
            f"--context-length {s.max_model_len}",
            f"--kv-cache-dtype {s.kv_cache_dtype}",
            f"--page-size {s.block_size}",
        ]
        if instances > 1:
            parts.append(f"--dp {instances}")
        return " ".join(parts), {}

    def stage_pool(
        self,
        stack: tuple[tuple[LayerSpec, int], ...],
        dtype: KVDtype,
        page: int,
        policy: WindowPolicy,
        budget_bytes: int,
    ) -> Pool:
        per_token = sum(n * s.bytes_per_token(dtype) for s, n in stack)
        if policy == "sglang_swa_pool":
            # SWA layers are the sliding ones and, for Llama-4, the chunked-attention ones
            # (get_hybrid_layer_ids); both pools are aligned down to whole pages.
            swa = sum(n * s.bytes_per_token(dtype) for s, n in stack if s.is_window)
            cell = per_token - swa + SWA_FULL_TOKENS_RATIO * swa
            tokens = int(budget_bytes // cell) // page * page if cell else 0
            swa_tokens = int(tokens * SWA_FULL_TOKENS_RATIO) // page * page
            return SwaTokenPool(
                groups_of(stack, page), tokens // page, 0, page, stack, dtype, policy,
                budget_bytes, swa_pool_tokens=swa_tokens,
            )  # fmt: skip
        tokens = budget_bytes // per_token // page * page if per_token else 0
        full = full_stack(stack)
        return TokenPool(
            groups_of(full, page), tokens // page, 0, page, full, dtype, "full_length",
            budget_bytes,
        )  # fmt: skip


__all__ = ["Sglang", "SwaTokenPool", "TokenPool"]
