"""From a KV budget to blocks, requests that fit, tokens, and the longest context.

One `Pool` per engine models how the engine carves its budget (engine_rules.md §1.3, §2, §3, §4):
how many allocation units there are, how many a request of `ctx` tokens needs, and what the
engine's own start-up log would print.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from planner.core.engines import EngineRules, SlidingPolicy
from planner.core.errors import FieldError
from planner.core.kv import layer_bytes_per_token, page_bytes, request_kv_bytes
from planner.core.model import LayerSpec, Stack, cdiv, stack_of
from planner.core.units import KVDtype

MAX_CONTEXT_SEARCH = 1 << 24


@dataclass(frozen=True, slots=True)
class KVGroup:
    """Layers sharing one block table (vLLM KV-cache group; one pool elsewhere)."""

    kind: str
    spec: LayerSpec
    layers: int
    padding_layers: int
    block_size: int

    def blocks_needed(self, ctx: int, mnbt: int) -> int:
        """Blocks the engine reserves for one request of `ctx` tokens (vLLM admission rule)."""
        bs = self.block_size
        w = self.spec.window_tokens
        if self.kind == "sliding" and w is not None:
            return cdiv(min(w - 1 + mnbt, ctx), bs) + 1
        if self.kind == "chunked" and w is not None:
            return cdiv(min(w + mnbt, ctx), bs)
        return cdiv(ctx, bs)


@dataclass(frozen=True, slots=True)
class Pool:
    """An engine's KV pool for one rank: units (blocks or token slots) and per-request need."""

    engine: str
    groups: tuple[KVGroup, ...]
    num_blocks: int
    reserved_blocks: int
    unit_tokens: int  # tokens per allocation unit (block size; 1 for token pools)
    mnbt: int
    stack: Stack
    dtype: KVDtype
    policy: SlidingPolicy
    budget_bytes: int
    per_token_bytes: int  # all layers of this rank, full length
    swa_pool_tokens: int | None = None  # SGLang hybrid SWA pool

    def blocks_per_request(self, ctx: int) -> int:
        if self.engine == "transformers":
            return cdiv(
                request_kv_bytes(self.stack, self.dtype, ctx, self.policy),
                max(1, self.per_token_bytes),
            )
        if self.engine == "trtllm" and any(
            g.kind != "full" and g.kind != "mla" for g in self.groups
        ):
            return sum(_cyclic_blocks(g, ctx) for g in self.groups)
        if self.engine == "sglang":
            return cdiv(ctx, self.unit_tokens)
        return sum(g.blocks_needed(ctx, self.mnbt) for g in self.groups)

    def max_requests(self, ctx: int) -> int:
        usable = self.num_blocks - self.reserved_blocks
        if usable <= 0:
            return 0
        if self._bytes_pool():
            need = self._request_bytes(ctx)
            return self.budget_bytes // need if need else 0
        if self.engine == "sglang" and self.swa_pool_tokens is not None:
            full_fit = usable // cdiv(ctx, self.unit_tokens)
            swa_need = self._swa_tokens_needed(ctx)
            swa_fit = self.swa_pool_tokens // swa_need if swa_need else full_fit
            return min(full_fit, swa_fit)
        need = self.blocks_per_request(ctx)
        return usable // need if need else 0

    def _swa_tokens_needed(self, ctx: int) -> int:
        """SGLang SWA-pool slots one request of `ctx` tokens holds: the window (for Llama-4 the
        attention chunk) in whole pages, since the SWA allocator hands out pages."""
        kept = max(
            (min(ctx, g.spec.window_tokens or ctx) for g in self.groups if _windowed(g.kind)),
            default=0,
        )
        return cdiv(kept, self.unit_tokens) * self.unit_tokens

    def _request_bytes(self, ctx: int) -> int:
        if self.engine == "transformers":
            return request_kv_bytes(self.stack, self.dtype, ctx, self.policy)
        return sum(
            _cyclic_blocks(g, ctx)
            * g.block_size
            * layer_bytes_per_token(g.spec, self.dtype)
            * g.layers
            for g in self.groups
        )

    def _bytes_pool(self) -> bool:
        """Engines whose admission is by bytes rather than by a shared block count."""
        return self.engine == "transformers" or (
            self.engine == "trtllm" and any(g.kind not in ("full", "mla") for g in self.groups)
        )

    def shared_units(self, shared_tokens: int) -> int:
        """Allocation units a shared prefix of `shared_tokens` saves per extra request: its
        whole blocks in every full-attention group (sliding groups are not shared)."""
        return sum(shared_tokens // g.block_size for g in self.groups if g.kind in ("full", "mla"))

    def fits(self, workload: Sequence[tuple[int, int]], shared_tokens: Sequence[int] = ()) -> bool:
        """Whether (context_tokens, count) pairs can all be resident at once; `shared_tokens`
        (per pair) are prefix tokens the engine stores once for the whole pair."""
        shared = list(shared_tokens) or [0] * len(workload)
        if self._bytes_pool():
            return sum(n * self._request_bytes(c) for c, n in workload) <= self.budget_bytes
        if self.engine == "sglang" and self.swa_pool_tokens is not None:
            full = sum(n * cdiv(c, self.unit_tokens) for c, n in workload)
            swa_need = sum(n * self._swa_tokens_needed(c) for c, n in workload)
            return full <= self.num_blocks and swa_need <= self.swa_pool_tokens
        usable = self.num_blocks - self.reserved_blocks
        need = sum(
            n * self.blocks_per_request(c) - (n - 1) * self.shared_units(sh)
            for (c, n), sh in zip(workload, shared, strict=True)
        )
        return need <= usable

    def reported_concurrency(self, ctx: int) -> float | None:
        """vLLM's "Maximum concurrency for N tokens per request: X.XXx" (ignores null block)."""
        if self.engine != "vllm":
            return None
        need = self.blocks_per_request(ctx)
        return round(self.num_blocks / need, 2) if need else None

    def reported_tokens(self) -> int:
        """What the engine logs as its KV size in tokens.

        vLLM: `GPU KV cache size: N tokens` = num_blocks // num_groups × block_size (divides by
        the number of groups for hybrid models, so it is not tokens per request). SGLang:
        max_total_num_tokens. TensorRT-LLM: blocks × tokens_per_block."""
        if self.engine == "vllm":
            return self.num_blocks // len(self.groups) * min(g.block_size for g in self.groups)
        return self.num_blocks * self.unit_tokens

    def max_tokens(self) -> int:
        """Tokens of full-attention context the usable pool holds across requests."""
        usable = max(0, self.num_blocks - self.reserved_blocks)
        if self.engine == "vllm":
            return usable // len(self.groups) * min(g.block_size for g in self.groups)
        return usable * self.unit_tokens

    def longest_context(self) -> int:
        """Largest ctx with at least one request admitted (binary search; need is monotone)."""
        if self.max_requests(1) < 1:
            return 0
        kinds = {g.kind for g in self.groups}
        if kinds <= {"full", "mla"} and not self._bytes_pool() and self.swa_pool_tokens is None:
            # Full attention only: need = Σ_groups cdiv(ctx, bs_g); with one block size the
            # answer is closed-form: every group gets usable // groups blocks.
            sizes = {g.block_size for g in self.groups}
            if len(sizes) == 1:
                usable = self.num_blocks - self.reserved_blocks
                if self.engine == "sglang":
                    longest = usable * self.unit_tokens
                else:
                    longest = usable // len(self.groups) * sizes.pop()
                return min(longest, MAX_CONTEXT_SEARCH)
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


def _windowed(kind: str) -> bool:
    return kind in ("sliding", "chunked")


def _cyclic_blocks(g: KVGroup, ctx: int) -> int:
    w = g.spec.window_tokens
    if g.kind in ("full", "mla") or w is None:
        return cdiv(ctx, g.block_size)
    # Cyclic buffer of W tokens, plus one block when the window is not block aligned.
    return cdiv(min(ctx, w), g.block_size) + (1 if ctx > w and w % g.block_size else 0)


def _as_full(spec: LayerSpec) -> LayerSpec:
    if spec.kind in ("sliding", "chunked"):
        return replace(spec, kind="full", window_tokens=None)
    return spec


def vllm_groups(
    stack: Stack, dtype: KVDtype, block_size: int, policy: SlidingPolicy
) -> tuple[tuple[KVGroup, ...], int]:
    """vLLM's KV-cache groups and the bytes one block id costs (page × group_size).

    Uniform spec → one group of all layers. Same type, different sizes → one group whose block
    costs the sum of pages. Hybrid → unify page sizes, bucket by spec, group_size = min bucket
    (or max when max < 1.5·min), strided split with padding layers (kv_cache_utils.py)."""
    buckets: dict[LayerSpec, int] = {}
    for s, n in stack:
        key = _as_full(s) if policy == "full_length" else s
        buckets[key] = buckets.get(key, 0) + n
    if len(buckets) == 1:
        spec, n = next(iter(buckets.items()))
        return (KVGroup(spec.kind, spec, n, 0, block_size),), page_bytes(
            spec, dtype, block_size
        ) * n
    kinds = {s.kind for s in buckets}
    if kinds <= {"full"} or kinds <= {"mla"}:
        spec = next(iter(buckets))
        cost = sum(page_bytes(s, dtype, block_size) * n for s, n in buckets.items())
        return (KVGroup(spec.kind, spec, sum(buckets.values()), 0, block_size),), cost

    pages = {s: page_bytes(s, dtype, block_size) for s in buckets}
    page_max = max(pages.values())
    for p in pages.values():
        if page_max % p:
            raise FieldError(
                "model",
                "vLLM cannot unify the page sizes of this hybrid model "
                f"({p} vs {page_max} bytes); try hybrid_kv_cache_manager=false",
            )
    group_size = _vllm_group_size(list(buckets.values()))
    groups: list[KVGroup] = []
    for s, n in buckets.items():
        num = cdiv(n, group_size)
        bs = block_size * (page_max // pages[s])
        for i in range(num):
            members = len(range(i, n, num))  # strided slice layers[i::num]
            groups.append(KVGroup(s.kind, s, members, group_size - members, bs))
    return tuple(groups), page_max * group_size


def _vllm_group_size(counts: Sequence[int]) -> int:
    """Layers per hybrid group: the smallest bucket, or the largest when it is < 1.5× the
    smallest (fewer padding layers, e.g. gpt-oss-20b + EAGLE's 12 sw + 13 full)."""
    small, large = min(counts), max(counts)
    return large if large < 1.5 * small else small


def _vllm_group_members(layers: Sequence[LayerSpec], policy: SlidingPolicy) -> list[list[int]]:
    """Layer indices of each hybrid KV-cache group, in `vllm_groups`' order: bucket by spec in
    first-appearance order, then split each bucket strided, `layers[i::num_groups]`."""
    buckets: dict[LayerSpec, list[int]] = {}
    for i, spec in enumerate(layers):
        key = _as_full(spec) if policy == "full_length" else spec
        buckets.setdefault(key, []).append(i)
    size = _vllm_group_size([len(v) for v in buckets.values()])
    out: list[list[int]] = []
    for idx in buckets.values():
        num = cdiv(len(idx), size)
        out.extend(idx[i::num] for i in range(num))
    return out


def vllm_pipeline_pool(
    rules: EngineRules,
    stages: Sequence[Sequence[LayerSpec]],
    dtype: KVDtype,
    block_size: int,
    policy: SlidingPolicy,
    budget_bytes: int,
    mnbt: int,
) -> Pool:
    """vLLM's pool over pipeline stages (`get_kv_cache_configs`, kv_cache_utils.py).

    The KV-cache groups are built once from the whole model and projected onto each stage's
    layers; a stage's block id costs page × its largest projected group (one group: the sum of
    its layers' pages), and every stage then uses the smallest num_blocks. Grouping each stage
    on its own picks another group size whenever a stage's sliding:full ratio differs from the
    model's (Gemma-3 at PP 4: 2 full layers on stage 0, yet groups of up to 3 layers there).
    `stages` holds each stage's per-rank layer specs in layer order."""
    whole = [spec for stage in stages for spec in stage]
    groups, _ = vllm_groups(stack_of(whole), dtype, block_size, policy)
    if len(groups) == 1:
        costs = [vllm_groups(stack_of(st), dtype, block_size, policy)[1] for st in stages]
        worst = max(range(len(stages)), key=costs.__getitem__)
        shown = vllm_groups(stack_of(stages[worst]), dtype, block_size, policy)[0]
    else:
        page = max(page_bytes(g.spec, dtype, block_size) for g in groups)
        members = _vllm_group_members(whole, policy)
        spans: list[range] = []
        for stage in stages:
            start = spans[-1].stop if spans else 0
            spans.append(range(start, start + len(stage)))
        on_stage = [[sum(1 for i in m if i in span) for m in members] for span in spans]
        costs = [page * max(counts) for counts in on_stage]
        worst = max(range(len(stages)), key=costs.__getitem__)
        size = max(on_stage[worst])
        shown = tuple(
            replace(g, layers=n, padding_layers=size - n)
            for g, n in zip(groups, on_stage[worst], strict=True)
        )
    stack = stack_of(stages[worst])
    return Pool(
        rules.name,
        shown,
        budget_bytes // costs[worst],
        rules.null_blocks,
        block_size,
        mnbt,
        stack,
        dtype,
        policy,
        budget_bytes,
        sum(n * layer_bytes_per_token(s, dtype) for s, n in stack),
    )


def _full_stack(stack: Stack) -> Stack:
    """The stack with window layers sized full length, merging specs that become equal."""
    merged: dict[LayerSpec, int] = {}
    for spec, n in stack:
        full = _as_full(spec)
        merged[full] = merged.get(full, 0) + n
    return tuple(merged.items())


def build_pool(
    rules: EngineRules,
    stack: Stack,
    dtype: KVDtype,
    block_size: int,
    policy: SlidingPolicy,
    budget_bytes: int,
    mnbt: int,
) -> Pool:
    per_token = sum(n * layer_bytes_per_token(s, dtype) for s, n in stack)
    name = rules.name

    def pool(
        groups: tuple[KVGroup, ...],
        num_blocks: int,
        stack: Stack = stack,
        policy: SlidingPolicy = policy,
        unit_tokens: int = block_size,
        swa_pool_tokens: int | None = None,
    ) -> Pool:
        return Pool(
            name,
            groups,
            num_blocks,
            rules.null_blocks,
            unit_tokens,
            mnbt,
            stack,
            dtype,
            policy,
            budget_bytes,
            per_token,
            swa_pool_tokens=swa_pool_tokens,
        )

    def groups_of(stack: Stack) -> tuple[KVGroup, ...]:
        # One group per distinct spec, for display and per-request block counting.
        return tuple(KVGroup(s.kind, s, n, 0, block_size) for s, n in stack)

    if name == "vllm":
        groups, block_cost = vllm_groups(stack, dtype, block_size, policy)
        return pool(groups, budget_bytes // block_cost)

    if name == "sglang":
        if policy == "sglang_swa_pool":
            # HybridSWAPoolConfigurator (pool_configurator.py): SWA layers are the sliding ones
            # and, for Llama-4, the chunked-attention ones (get_hybrid_layer_ids).
            swa = sum(n * layer_bytes_per_token(s, dtype) for s, n in stack if _windowed(s.kind))
            full = per_token - swa
            # swa_full_tokens_ratio 0.8: the SWA pool holds 0.8 × the full pool's tokens; both
            # pools are aligned down to whole pages (_solve_pool_sizes).
            cell = full + 0.8 * swa
            tokens = int(budget_bytes // cell) // block_size * block_size
            swa_tokens = int(tokens * 0.8) // block_size * block_size
            return pool(groups_of(stack), tokens // block_size, swa_pool_tokens=swa_tokens)
        tokens = budget_bytes // per_token // block_size * block_size if per_token else 0
        full_stack = _full_stack(stack)
        return pool(groups_of(full_stack), tokens // block_size, full_stack, "full_length")

    if name == "trtllm":
        max_tokens = budget_bytes // per_token if per_token else 0
        # No max_attention_window (policy full_length): windowed layers get full blocks too.
        sized = _full_stack(stack) if policy == "full_length" else stack
        return pool(groups_of(sized), max_tokens // block_size, sized)

    # transformers: no paging; token slots of the full model width.
    slots = budget_bytes // per_token if per_token else 0
    return pool(groups_of(stack), slots, unit_tokens=1)
