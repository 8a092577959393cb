"""vLLM's KV-cache groups and block pool (vllm/v1/core/kv_cache_utils.py).

Uniform spec → one group of all layers. Same type, different sizes → one group whose block
costs the sum of pages. Hybrid → unify page sizes, bucket by spec, group_size = min bucket (or
max when max < 1.5·min), strided split with padding layers. Over pipeline stages the groups are
built once from the whole model and projected onto each stage (`get_kv_cache_configs`). Before
0.11 each worker groups its own layers, each bucket in consecutive runs of group_size
(`get_kv_cache_config`, `unify_kv_cache_configs`): `stage_groups`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import cast

from planner.core.capacity import KVGroup, Pool
from planner.core.errors import FieldError
from planner.core.specs import LayerSpec, Stack, WindowPolicy, cdiv, stack_of
from planner.core.units import KVDtype


@dataclass(frozen=True, slots=True)
class VllmPool(Pool):
    """vLLM's block pool: one block id costs a page in every layer of the largest group."""

    in_flight_tokens: int = 0
    block_bytes: int = 0  # what one block id costs on this worker (page × group size)
    # num_blocks of the worker whose log line is read, where it logs before the minimum over
    # workers is taken (None: the logged figures use num_blocks)
    logged_blocks: int | None = None
    # "GPU KV cache size: N tokens": int(max_concurrency × max_model_len) in newer releases
    # (kv_cache_utils.get_kv_cache_capacity), num_blocks // groups × block_size before.
    tokens_from_concurrency: bool = True
    # 0.9.0 logs the concurrency as num_blocks × block_size / max_model_len.
    concurrency_from_tokens: bool = False
    # Speculative decoding: slots a decoding request reserves past its tokens, capped at
    # max_model_len (`length_cap`) as allocate_slots caps them; 0 = none.
    reserved_tokens: int = 0
    length_cap: int = 0
    # blocks_per_request by length, once each (a plan asks about ten times); not the pool's value
    _blocks: dict[int, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def _admitted(self, ctx: int) -> int:
        if not self.reserved_tokens or ctx >= self.length_cap:
            return ctx
        return min(ctx + self.reserved_tokens, self.length_cap)

    def blocks_per_request(self, ctx: int) -> int:
        blocks = self._blocks.get(ctx)
        if blocks is None:
            admitted = self._admitted(ctx)
            blocks = sum(g.blocks_needed(admitted, self.in_flight_tokens) for g in self.groups)
            self._blocks[ctx] = blocks
        return blocks

    def group_blocks(self, group: KVGroup, ctx: int) -> int:
        return group.blocks_needed(self._admitted(ctx), self.in_flight_tokens)

    def concurrency(self, ctx: int) -> float:
        """get_max_concurrency_for_kv_cache_config: all blocks over one request's need (the
        null block is not subtracted)."""
        need = self.blocks_per_request(ctx)
        blocks = self.num_blocks if self.logged_blocks is None else self.logged_blocks
        return blocks / need if need else 0.0

    def reported_concurrency(self, ctx: int) -> float | None:
        if self.concurrency_from_tokens and ctx:
            blocks = self.num_blocks if self.logged_blocks is None else self.logged_blocks
            return round(blocks * self.unit_tokens / ctx, 2)
        return round(self.concurrency(ctx), 2) if self.blocks_per_request(ctx) else None

    def reported_tokens(self, max_model_len: int) -> int:
        if self.tokens_from_concurrency:
            return int(self.concurrency(max_model_len) * max_model_len)
        blocks = self.num_blocks if self.logged_blocks is None else self.logged_blocks
        return blocks // len(self.groups) * min(g.block_size for g in self.groups)

    def max_tokens(self) -> int:
        return self.usable_blocks // len(self.groups) * min(g.block_size for g in self.groups)

    def at_startup(self) -> VllmPool:
        """The pool as start-up sizes it: without speculative reservations, which a request
        at max_model_len has capped away (vLLM's start check and max_model_len estimate)."""
        return replace(self, reserved_tokens=0) if self.reserved_tokens else self

    def longest_context(self) -> int:
        return Pool.longest_context(self.at_startup())

    def bytes_for(self, ctx: int) -> int:
        """What one request of `ctx` tokens takes from the pool, padding included."""
        return self.block_bytes * self.blocks_per_request(ctx)

    def closed_form_longest(self) -> int | None:
        # Full attention only with one block size: every group gets usable // groups blocks.
        if any(g.spec.is_window or not g.spec.grows_with_context for g in self.groups):
            return None
        sizes = {g.block_size for g in self.groups}
        if len(sizes) != 1:
            return None
        return self.usable_blocks // len(self.groups) * sizes.pop()


def group_key(spec: LayerSpec, policy: WindowPolicy) -> LayerSpec:
    return spec.as_full() if policy == "full_length" else spec


@lru_cache(maxsize=2048)
def vllm_groups(
    stack: Stack,
    dtype: KVDtype,
    block_size: int,
    policy: WindowPolicy,
    group_ratio: float = 1.5,
    strided: bool = True,
) -> tuple[tuple[KVGroup, ...], int]:
    """vLLM's KV-cache groups and the bytes one block id costs (page × group_size); each
    bucket split strided, layers[i::num] (0.11+), or in consecutive runs (before)."""
    buckets: dict[LayerSpec, int] = {}
    for s, n in stack:
        key = group_key(s, policy)
        buckets[key] = buckets.get(key, 0) + n
    if len(buckets) == 1:
        spec, n = next(iter(buckets.items()))
        return (KVGroup(spec, n, 0, block_size),), spec.page_bytes(dtype, block_size) * n
    kinds = {s.family for s in buckets}
    if len(kinds) == 1 and not next(iter(buckets)).is_window:
        # Same type, different sizes (UniformTypeKVCacheSpecs): one group, pages summed.
        spec = next(iter(buckets))
        cost = sum(s.page_bytes(dtype, block_size) * n for s, n in buckets.items())
        return (KVGroup(spec, sum(buckets.values()), 0, block_size),), cost

    pages = {s: s.page_bytes(dtype, block_size) for s in buckets}
    page_max = max(pages.values())
    for p in pages.values():
        if page_max % p:
            raise FieldError("model", "vllm.page_sizes_not_unified", p=p, page_max=page_max)
    group_size = group_size_for(list(buckets.values()), group_ratio)
    groups: list[KVGroup] = []
    for s, n in buckets.items():
        num = cdiv(n, group_size)
        bs = s.group_block_size(block_size * (page_max // pages[s]))
        for i in range(num):
            # strided slice layers[i::num]; before 0.11 layers[i * size:(i + 1) * size]
            members = len(range(i, n, num)) if strided else min(group_size, n - i * group_size)
            groups.append(KVGroup(s, members, group_size - members, bs))
    return tuple(groups), page_max * group_size


def group_size_for(counts: Sequence[int], ratio: float = 1.5) -> int:
    """Layers per hybrid group: the smallest bucket, or the largest when it is < ratio × the
    smallest (fewer padding layers, e.g. gpt-oss-20b + EAGLE's 12 sw + 13 full)."""
    small, large = min(counts), max(counts)
    return large if large < ratio * small else small


def group_members(
    layers: Sequence[LayerSpec], policy: WindowPolicy, ratio: float = 1.5
) -> list[list[int]]:
    """Layer indices of each hybrid KV-cache group, in `vllm_groups`' order: bucket by spec in
    first-appearance order, then split each bucket strided, `layers[i::num_groups]`."""
    buckets: dict[LayerSpec, list[int]] = {}
    for i, spec in enumerate(layers):
        buckets.setdefault(group_key(spec, policy), []).append(i)
    size = group_size_for([len(v) for v in buckets.values()], ratio)
    out: list[list[int]] = []
    for idx in buckets.values():
        num = cdiv(len(idx), size)
        out.extend(idx[i::num] for i in range(num))
    return out


def vllm_pipeline_pool(
    stages: Stack | Sequence[Sequence[LayerSpec]],
    dtype: KVDtype,
    block_size: int,
    policy: WindowPolicy,
    budget_bytes: int,
    in_flight_tokens: int,
    *,
    null_blocks: int = 1,
    tokens_from_concurrency: bool = True,
    group_ratio: float = 1.5,
    reserved_tokens: int = 0,
    length_cap: int = 0,
    log_first_worker: bool = False,
    stage_groups: bool = False,
    concurrency_from_tokens: bool = False,
) -> VllmPool:
    """vLLM's pool over pipeline stages: a stage's block id costs page × its largest projected
    group (one group: the sum of its layers' pages), and every stage uses the smallest
    num_blocks. Grouping each stage on its own would pick another group size whenever a stage's
    sliding:full ratio differs from the model's (Gemma-3 at PP 4), which releases before 0.11
    do (`stage_groups`: the scheduler then takes worker 0's own groups). One stage may come as
    its (spec, count) stack."""
    logged: int | None = None
    strided = not stage_groups
    if _is_stack(stages):
        stack = cast(Stack, stages)
        groups, cost = vllm_groups(stack, dtype, block_size, policy, group_ratio, strided)
        num_blocks = budget_bytes // cost
    elif len(stages) == 1:
        stack = stack_of(cast(Sequence[LayerSpec], stages[0]))
        groups, cost = vllm_groups(stack, dtype, block_size, policy, group_ratio, strided)
        num_blocks = budget_bytes // cost
    else:
        layered = cast(Sequence[Sequence[LayerSpec]], stages)
        whole = [spec for stage in layered for spec in stage]
        project = _own_groups if stage_groups else _project
        groups, cost, stack, first_cost = project(
            whole, layered, dtype, block_size, policy, group_ratio
        )
        num_blocks = budget_bytes // cost
        if log_first_worker:
            logged = budget_bytes // first_cost
    return VllmPool(
        groups=groups,
        num_blocks=num_blocks,
        reserved_blocks=null_blocks,
        unit_tokens=block_size,
        stack=stack,
        dtype=dtype,
        policy=policy,
        budget_bytes=budget_bytes,
        in_flight_tokens=in_flight_tokens,
        block_bytes=cost,
        logged_blocks=logged,
        tokens_from_concurrency=tokens_from_concurrency,
        concurrency_from_tokens=concurrency_from_tokens,
        reserved_tokens=reserved_tokens,
        length_cap=length_cap,
    )


def _is_stack(stages: object) -> bool:
    first = stages[0] if isinstance(stages, tuple | list) and stages else None
    return isinstance(first, tuple) and len(first) == 2 and isinstance(first[1], int)


def one_request_bytes(
    stack: Stack,
    dtype: KVDtype,
    block_size: int,
    policy: WindowPolicy,
    ctx: int,
    in_flight_tokens: int,
    group_ratio: float = 1.5,
) -> int:
    """vLLM's start-up check: Σ layers max_memory_usage_bytes(ctx) (padding layers excluded)."""
    groups, _ = vllm_groups(stack, dtype, block_size, policy, group_ratio)
    return sum(
        g.layers * g.page_bytes(dtype) * g.blocks_needed(ctx, in_flight_tokens) for g in groups
    )


def _own_groups(
    whole: list[LayerSpec],
    stages: Sequence[Sequence[LayerSpec]],
    dtype: KVDtype,
    block_size: int,
    policy: WindowPolicy,
    ratio: float,
) -> tuple[tuple[KVGroup, ...], int, Stack, int]:
    """Before 0.11: each worker's own groups (consecutive runs); as `_project` returns them.
    unify_kv_cache_configs sorts each worker's groups by spec type and asserts that the groups
    worker 0 and each other worker hold pairwise (zip) have equal specs: vLLM fails to start
    where a stage's layer mix splits another way (Gemma-2's alternation over odd stages)."""
    del whole
    own = [
        vllm_groups(stack_of(list(st)), dtype, block_size, policy, ratio, False) for st in stages
    ]
    first = sorted(own[0][0], key=_unify_order)
    for stage, (groups, _) in enumerate(own[1:], start=1):
        theirs = sorted(groups, key=_unify_order)
        if any(a.spec != b.spec for a, b in zip(first, theirs, strict=False)):
            raise FieldError(
                "pipeline_parallel_size",
                "vllm.pp_stage_groups_differ",
                stage=stage,
                groups=", ".join(g.kind for g in theirs),
                first=", ".join(g.kind for g in first),
            )
    worst = max(range(len(stages)), key=lambda i: own[i][1])
    return own[0][0], own[worst][1], stack_of(list(stages[worst])), own[0][1]


def _unify_order(group: KVGroup) -> tuple[str, str]:
    """The order unify_kv_cache_configs sorts groups in: by spec type (0.9: type_id,
    "full_attention_…" < "sliding_window_…"; 0.10: the class name), then by the spec."""
    return group.kind, repr(group.spec)


def _project(
    whole: list[LayerSpec],
    stages: Sequence[Sequence[LayerSpec]],
    dtype: KVDtype,
    block_size: int,
    policy: WindowPolicy,
    ratio: float,
) -> tuple[tuple[KVGroup, ...], int, Stack, int]:
    """The whole model's groups projected on each stage: (the groups worker 0 shows, what a
    block id costs on the worst stage, that stage's stack, what it costs on worker 0)."""
    groups, _ = vllm_groups(stack_of(whole), dtype, block_size, policy, ratio)
    # What a block id costs on each worker; every worker takes the smallest num_blocks, and the
    # scheduler's groups are worker 0's (generate_scheduler_kv_cache_config), padded to the
    # longest group there.
    if len(groups) == 1:
        costs = [
            vllm_groups(stack_of(list(st)), dtype, block_size, policy, ratio)[1] for st in stages
        ]
        worst = max(range(len(stages)), key=costs.__getitem__)
        shown = vllm_groups(stack_of(list(stages[0])), dtype, block_size, policy, ratio)[0]
    else:
        page = max(g.spec.page_bytes(dtype, block_size) for g in groups)
        members = group_members(whole, policy, ratio)
        spans: list[range] = []
        for stage in stages:
            start = spans[-1].stop if spans else 0
            spans.append(range(start, start + len(stage)))
        on_stage = [[sum(1 for i in m if i in span) for m in members] for span in spans]
        costs = [page * max(counts) for counts in on_stage]
        worst = max(range(len(stages)), key=costs.__getitem__)
        size = max(on_stage[0])
        shown = tuple(
            replace(g, layers=n, padding_layers=size - n)
            for g, n in zip(groups, on_stage[0], strict=True)
        )
    return shown, costs[worst], stack_of(list(stages[worst])), costs[0]
