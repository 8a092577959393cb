"""What vLLM's start-up check and max-length estimate count for one request, per release."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from planner.core.capacity import Pool
from planner.core.engines.versions import since
from planner.core.engines.vllm.groups import VllmPool, one_request_bytes, vllm_groups
from planner.core.engines.vllm.releases import (
    GROUPS_NEED_ALL_SINCE,
    GROUPS_NEED_SINCE,
    POOL_NEED_SINCE,
)
from planner.core.engines.vllm.rules import vllm_max_len_scope
from planner.core.parallel import Stages
from planner.core.specs import stack_of

if TYPE_CHECKING:
    from planner.core.engines.vllm import Vllm
    from planner.core.inputs import Inputs


def startup_need(engine: Vllm, inp: Inputs, pool: Pool) -> Callable[[int], int]:
    """Bytes vLLM's start check counts for one request of a length. From 0.29 what the
    request takes from the pool, padding included (bytes per block × its blocks,
    `_max_memory_usage_bytes_from_groups`); before, Σ layers max_memory_usage_bytes over
    each worker's layers, or the whole model's in 0.14–0.16; for hybrids from 0.14 the
    groups' bytes per block id × the first group's blocks (0.14–0.18) or all groups' (0.19+)."""
    assert isinstance(pool, VllmPool)
    if since(engine.version, POOL_NEED_SINCE):
        return pool.at_startup().bytes_for
    if since(engine.version, GROUPS_NEED_SINCE) and len(pool.groups) > 1:
        return _groups_need(engine, inp, pool)
    if vllm_max_len_scope(engine.version_text) == "whole_model" and inp.pp > 1:
        stacks = Stages.of(inp.shape, engine, inp.tp, 1).stacks
    else:
        stacks = Stages.of(inp.shape, engine, inp.tp, inp.pp).stacks

    # Chunked layers sized full length by the old env default still count as chunked here:
    # the estimate reads the layers' own specs.
    policy = "window" if engine.chunked_full_length(inp.shape) else pool.policy

    def need(length: int) -> int:
        # Every worker checks its own layers; the one needing most fails first.
        return max(
            one_request_bytes(
                stack, inp.kv_dtype, inp.block_size, policy, length,
                pool.in_flight_tokens, engine.group_ratio,
            )
            for stack in stacks
        )  # fmt: skip

    return need


def _groups_need(engine: Vllm, inp: Inputs, pool: VllmPool) -> Callable[[int], int]:
    """`_max_memory_usage_bytes_from_groups` (0.14–0.28): page × group size × blocks, over the
    whole model's groups against the smallest budget (0.14–0.16) or each worker's projected
    groups (0.17+; the worker whose block id costs most fails first: the pool's cost)."""
    start = pool.at_startup()
    cost = start.block_bytes
    if inp.pp > 1 and vllm_max_len_scope(engine.version_text) == "whole_model":
        ordered = Stages.of(inp.shape, engine, inp.tp, inp.pp).ordered()
        whole = stack_of(spec for stage in ordered for spec in stage)
        cost = vllm_groups(whole, inp.kv_dtype, inp.block_size, pool.policy, engine.group_ratio)[1]
    if since(engine.version, GROUPS_NEED_ALL_SINCE):
        return lambda length: cost * start.blocks_per_request(length)
    first = start.groups[0]  # kv_cache_groups[0]: the first layer's kind
    return lambda length: cost * start.group_blocks(first, length)
