"""SGLang's pools: the token pool (page_size 1 by default), the hybrid sliding-window pair
(HybridSWAPoolConfigurator) and, for Mamba-ish hybrids, the token pool beside a state pool
(python/sglang/srt/mem_cache/memory_pool.py, model_executor/pool_configurator.py,
mem_cache/kv_cache_configurator.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from planner.core.budget.terms import BudgetTerms, StartVerdict
from planner.core.capacity import Pool
from planner.core.engines.sglang.budget import sglang_start_check
from planner.core.engines.sglang.state import StatePool
from planner.core.specs import cdiv


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

    def fits(
        self,
        workload: Sequence[tuple[int, int]],
        shared: Sequence[int] = (),
        again: Sequence[int] = (),
    ) -> bool:
        full = sum(n * cdiv(c, self.unit_tokens) for c, n in workload)
        swa_need = sum(n * self._swa_tokens_needed(c) for c, n in workload)
        return full <= self.num_blocks and swa_need <= self.swa_pool_tokens

    def closed_form_longest(self) -> int | None:
        return None


_NO_STATE = StatePool(0, 0, 1, 0)


@dataclass(frozen=True, slots=True)
class StateTokenPool(TokenPool):
    """A Mamba-ish hybrid: the full-attention layers' token pool and the state pool beside it
    (`state`); a running request holds `state.slots_per_request` state slots."""

    shares_prefix: ClassVar[bool] = False

    state: StatePool = _NO_STATE

    def max_requests(self, ctx: int) -> int:
        return min(TokenPool.max_requests(self, ctx), max(0, self.state.running_cap))

    def fits(
        self,
        workload: Sequence[tuple[int, int]],
        shared: Sequence[int] = (),
        again: Sequence[int] = (),
    ) -> bool:
        tokens = sum(n * cdiv(c, self.unit_tokens) for c, n in workload)
        running = sum(n for _, n in workload)
        return tokens <= self.num_blocks and running <= self.state.running_cap

    def closed_form_longest(self) -> int | None:
        return self.usable_blocks * self.unit_tokens if self.state.running_cap > 0 else 0


def swa_floor(pool: SwaTokenPool, *, exclusive: bool) -> StartVerdict | None:
    """pool_configurator.validate_swa_pool_size: the SWA pool must hold more than the
    window + one page (the window as the model file gives it: gpt-oss's and Gemma-4's are
    exclusive, the window less one)."""
    window = max((g.spec.window_tokens or 0 for g in pool.groups if g.spec.is_window), default=0)
    if not window:
        return None
    window -= 1 if exclusive else 0
    if window + pool.unit_tokens < pool.swa_pool_tokens:
        return None
    return StartVerdict(
        False,
        "no_kv_memory",
        f"SWA pool ({pool.swa_pool_tokens} tokens) cannot hold even one request: the "
        f"prefill admission floor is sliding_window_size ({window}) + page_size "
        f"({pool.unit_tokens}). Increase --swa-full-tokens-ratio or the total KV budget.",
        pool.num_blocks * pool.unit_tokens,
    )


def state_floor(pool: StateTokenPool, terms: BudgetTerms | None) -> StartVerdict | None:
    """_handle_max_mamba_cache refuses a pool of no slots, _profile_available_bytes a KV
    rest ≤ 0 after it, resolve_max_num_reqs a running limit of 0."""
    sp, tokens = pool.state, pool.num_blocks * pool.unit_tokens
    if sp.slots <= 0:
        return StartVerdict(False, "no_kv_memory", (
            f"Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
            f"max_mamba_cache_size={sp.slots} (mamba_cache_per_req="
            f"{sp.slot_bytes / (1 << 20):.2f} MB). Try: (1) reduce --max-running-requests, "
            "(2) increase --mem-fraction-static, or (4) use GPUs with more memory."
        ), tokens)  # fmt: skip
    if sp.kv_bytes <= 0 and terms is not None:
        return sglang_start_check(budget=replace(terms, kv_budget_bytes=sp.kv_bytes))
    if sp.running_cap <= 0:
        return StartVerdict(False, "no_kv_memory", (
            "Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
            f"max_mamba_cache_size={sp.slots}, mamba_ratio={sp.slots_per_request}. Try: (1) "
            "reduce --max-running-requests, (2) increase --mem-fraction-static, or (3) use "
            "GPUs with more memory."
        ), tokens)  # fmt: skip
    return None


__all__ = ["StateTokenPool", "SwaTokenPool", "TokenPool", "state_floor", "swa_floor"]
