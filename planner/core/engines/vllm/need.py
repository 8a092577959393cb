"""What vLLM's start-up check and max-length estimate count for one request, per release: the
one copy that plan() and the log reader both ask (`Vllm.startup_need`, `Vllm.estimate_max_len`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from planner.core.capacity import MAX_CONTEXT_SEARCH
from planner.core.engines.versions import Version, since
from planner.core.engines.vllm.groups import VllmPool, one_request_bytes, vllm_groups
from planner.core.engines.vllm.releases import (
    GROUPS_NEED_ALL_SINCE,
    GROUPS_NEED_SINCE,
    PADDED_NEED_SINCE,
)
from planner.core.engines.vllm.rules import vllm_max_len_scope
from planner.core.engines.vllm.start import vllm_estimate_max_model_len
from planner.core.specs import LayerSpec, Stack


class Release(Protocol):
    """The vLLM release whose rules count (`Vllm` is one)."""

    @property
    def version(self) -> Version: ...
    @property
    def version_text(self) -> str: ...
    @property
    def group_ratio(self) -> float: ...
    def chunked_sized_full(self, layers: Iterable[LayerSpec]) -> bool: ...


def startup_need(
    engine: Release,
    pool: VllmPool,
    stage_stacks: Sequence[Stack],
    whole_model: Callable[[], Stack],
) -> Callable[[int], int]:
    """Bytes vLLM's start check counts for one request of a length. From 0.21 (at the latest)
    what the request takes from the pool, padding included (bytes per block × its blocks,
    `_max_memory_usage_bytes_from_groups`); before, Σ layers max_memory_usage_bytes over
    each worker's layers (`stage_stacks`, one rank of each stage), or the whole model's
    (`whole_model`) under PP in 0.14–0.16; for hybrids in 0.14–0.20 the groups' bytes per
    block id × the first group's blocks (0.14–0.18) or all groups' (0.19–0.20)."""
    if since(engine.version, PADDED_NEED_SINCE):
        return pool.at_startup().bytes_for
    if since(engine.version, GROUPS_NEED_SINCE) and len(pool.groups) > 1:
        return _groups_need(engine, pool, len(stage_stacks) > 1, whole_model)
    if vllm_max_len_scope(engine.version_text) == "whole_model" and len(stage_stacks) > 1:
        stacks: tuple[Stack, ...] = (whole_model(),)
    else:
        stacks = tuple(stage_stacks)

    # Chunked layers sized full length by the old env default still count as chunked here:
    # the estimate reads the layers' own specs.
    layers = [spec for stack in stacks for spec, _ in stack]
    policy = "window" if engine.chunked_sized_full(layers) else pool.policy
    block = pool.unit_tokens

    def need(length: int) -> int:
        # Every worker checks its own layers; the one needing most fails first.
        return max(
            one_request_bytes(
                stack, pool.dtype, block, policy, length, pool.in_flight_tokens,
                engine.group_ratio,
            )
            for stack in stacks
        )  # fmt: skip

    return need


def _groups_need(
    engine: Release, pool: VllmPool, staged: bool, whole_model: Callable[[], Stack]
) -> Callable[[int], int]:
    """`_max_memory_usage_bytes_from_groups` (0.14–0.28): page × group size × blocks, over the
    whole model's groups against the smallest budget (0.14–0.16) or each worker's projected
    groups (0.17+; the worker whose block id costs most fails first: the pool's cost)."""
    start = pool.at_startup()
    cost = start.block_bytes
    if staged and vllm_max_len_scope(engine.version_text) == "whole_model":
        whole = whole_model()
        cost = vllm_groups(whole, pool.dtype, pool.unit_tokens, pool.policy, engine.group_ratio)[1]
    if since(engine.version, GROUPS_NEED_ALL_SINCE):
        return lambda length: cost * start.blocks_per_request(length)
    first = start.groups[0]  # kv_cache_groups[0]: the first layer's kind

    def need(length: int) -> int:
        return cost * start.group_blocks(first, length)

    return need


def estimate_max_len(
    pool: VllmPool,
    need: Callable[[int], int],
    check_memory_bytes: int,
    stage_stacks: Sequence[Stack],
) -> int:
    """vLLM's `estimate_max_model_len` over the memory its check uses: the longest length
    whose one-request need fits, searched up to MAX_CONTEXT_SEARCH; 0 if one token does not."""
    if check_memory_bytes <= 0:
        return 0
    grows_evenly = all(
        not spec.is_window and spec.grows_with_context
        for stack in stage_stacks
        for spec, _ in stack
    )
    if grows_evenly and len({g.block_size for g in pool.groups}) == 1:
        # Full attention: the need grows by the same bytes every block of tokens, so the
        # search's answer is the whole blocks that fit (what it would find, at once).
        bs = pool.groups[0].block_size
        per_block = need(bs)
        if not per_block:
            return 0
        return min(MAX_CONTEXT_SEARCH, check_memory_bytes // per_block * bs)
    return vllm_estimate_max_model_len(check_memory_bytes, MAX_CONTEXT_SEARCH, need)
