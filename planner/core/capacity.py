"""From a KV budget to blocks, requests that fit, tokens, and the longest context.

`Pool` is what every engine's pool answers; each engine builds its own subclass (in
`planner.core.engines`): how many allocation units there are, how many a request of `ctx`
tokens needs, and what the engine's own start-up log would print.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from planner.core.specs import LayerSpec, Stack, WindowPolicy, cdiv
from planner.core.units import KVDtype

MAX_CONTEXT_SEARCH = 1 << 24


@dataclass(frozen=True, slots=True)
class KVGroup:
    """Layers sharing one block table (vLLM KV-cache group; one pool elsewhere)."""

    spec: LayerSpec
    layers: int
    padding_layers: int
    block_size: int

    @property
    def kind(self) -> str:
        return self.spec.kind

    def blocks_needed(self, ctx: int, in_flight_tokens: int) -> int:
        """Blocks the engine reserves for one request of `ctx` tokens (vLLM admission rule)."""
        return self.spec.admission_blocks(ctx, self.block_size, in_flight_tokens)

    def page_bytes(self, dtype: KVDtype) -> int:
        return self.spec.page_bytes(dtype, self.block_size)


@dataclass(frozen=True, slots=True)
class Pool(ABC):
    """An engine's KV pool for one rank: units (blocks or token slots) and per-request need."""

    groups: tuple[KVGroup, ...]
    num_blocks: int
    reserved_blocks: int
    unit_tokens: int  # tokens per allocation unit (block size; 1 for token pools)
    stack: Stack  # the rank's layers as (spec, count) pairs
    dtype: KVDtype
    policy: WindowPolicy
    budget_bytes: int

    @property
    def usable_blocks(self) -> int:
        return max(0, self.num_blocks - self.reserved_blocks)

    @property
    def per_token_bytes(self) -> int:
        """All layers of this rank, full length."""
        return sum(n * s.bytes_per_token(self.dtype) for s, n in self.stack)

    @abstractmethod
    def blocks_per_request(self, ctx: int) -> int:
        """Allocation units one request of `ctx` tokens needs by the engine's rule."""

    def group_blocks(self, group: KVGroup, ctx: int) -> int:
        """One group's share of `blocks_per_request` (for the answer's per-group rows)."""
        return cdiv(group.spec.tokens_kept(ctx, self.policy), group.block_size)

    def max_requests(self, ctx: int) -> int:
        usable = self.usable_blocks
        need = self.blocks_per_request(ctx)
        return usable // need if usable > 0 and need else 0

    # Whether requests sharing a prefix hold its blocks once in this pool's admission.
    shares_prefix: ClassVar[bool] = True

    def max_requests_sharing(self, ctx: int, shared_tokens: int) -> int:
        """Requests of `ctx` tokens that fit at once when they share `shared_tokens` of prefix:
        the first holds every block, each further one all but the shared ones."""
        need, saved = self.blocks_per_request(ctx), self.shared_units(shared_tokens)
        if not self.shares_prefix or saved <= 0 or saved >= need:
            return self.max_requests(ctx)
        usable = self.usable_blocks
        return 0 if usable < need else 1 + (usable - need) // (need - saved)

    def shared_units(self, shared_tokens: int) -> int:
        """Allocation units a shared prefix of `shared_tokens` saves per extra request: its
        whole blocks in every prefix-shareable group (window groups are not shared)."""
        return sum(shared_tokens // g.block_size for g in self.groups if g.spec.prefix_shareable)

    def fits(
        self,
        workload: Sequence[tuple[int, int]],
        shared_tokens: Sequence[int] = (),
        reusers: Sequence[int] = (),
    ) -> bool:
        """Whether (context_tokens, count) pairs can all be resident at once; `shared_tokens`
        (per pair) are prefix tokens the engine stores once, and `reusers` (per pair) the
        requests that find them held already (default count − 1: a prefix per pair)."""
        shared = list(shared_tokens) or [0] * len(workload)
        again = list(reusers) or [n - 1 for _, n in workload]
        need = sum(
            n * self.blocks_per_request(c) - r * self.shared_units(sh)
            for (c, n), sh, r in zip(workload, shared, again, strict=True)
        )
        return need <= self.usable_blocks

    def reported_concurrency(self, ctx: int) -> float | None:
        """The engine's own "maximum concurrency" log figure, where it prints one."""
        return None

    def reported_tokens(self, max_model_len: int) -> int:
        """What the engine logs as its KV size in tokens (SGLang max_total_num_tokens,
        TensorRT-LLM blocks × tokens_per_block; vLLM overrides)."""
        return self.num_blocks * self.unit_tokens

    def max_tokens(self) -> int:
        """Tokens of full-attention context the usable pool holds across requests."""
        return self.usable_blocks * self.unit_tokens

    def closed_form_longest(self) -> int | None:
        """The longest context without a search, where the rule allows one."""
        return None

    def longest_context(self) -> int:
        """Largest ctx with at least one request admitted (binary search; need is monotone)."""
        if self.max_requests(1) < 1:
            return 0
        closed = self.closed_form_longest()
        if closed is not None:
            return min(closed, MAX_CONTEXT_SEARCH)
        lo, hi = 1, MAX_CONTEXT_SEARCH
        if self.max_requests(hi) >= 1:
            return hi
        while lo + 1 < hi:
            mid = (lo + hi) // 2
            if self.max_requests(mid) >= 1:
                lo = mid
            else:
                hi = mid
        return lo


@dataclass(frozen=True, slots=True)
class BytesBudgetPool(Pool):
    """Admission by bytes, not by a shared block count (no paging, or cyclic window buffers):
    a request of `ctx` tokens holds `request_bytes(ctx)` of the budget; nothing is shared."""

    shares_prefix: ClassVar[bool] = False

    @abstractmethod
    def request_bytes(self, ctx: int) -> int:
        """Bytes one request of `ctx` tokens holds."""

    def max_requests(self, ctx: int) -> int:
        if self.usable_blocks <= 0:
            return 0
        need = self.request_bytes(ctx)
        return self.budget_bytes // need if need else 0

    def fits(
        self,
        workload: Sequence[tuple[int, int]],
        shared_tokens: Sequence[int] = (),
        reusers: Sequence[int] = (),
    ) -> bool:
        return sum(n * self.request_bytes(c) for c, n in workload) <= self.budget_bytes


def full_stack(stack: Stack) -> Stack:
    """The stack with window layers sized full length, merging specs that become equal."""
    merged: dict[LayerSpec, int] = {}
    for spec, n in stack:
        full = spec.as_full()
        merged[full] = merged.get(full, 0) + n
    return tuple(merged.items())


def groups_of(stack: Stack, block_size: int) -> tuple[KVGroup, ...]:
    """One group per distinct spec, for display and per-request block counting."""
    return tuple(KVGroup(s, n, 0, block_size) for s, n in stack)


__all__ = ["MAX_CONTEXT_SEARCH", "BytesBudgetPool", "KVGroup", "Pool", "full_stack", "groups_of"]
