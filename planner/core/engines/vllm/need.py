"""What vLLM's start-up check and max-length estimate count for one request, per release."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from planner.core.capacity import Pool
from planner.core.engines.versions import since
from planner.core.engines.vllm.groups import VllmPool, one_request_bytes
from planner.core.engines.vllm.releases import POOL_NEED_SINCE
from planner.core.engines.vllm.rules import vllm_max_len_scope
from planner.core.parallel import Stages

if TYPE_CHECKING:
    from planner.core.engines.vllm import Vllm
    from planner.core.inputs import Inputs


def startup_need(engine: Vllm, inp: Inputs, pool: Pool) -> Callable[[int], int]:
    """Bytes vLLM's start check counts for one request of a length. From 0.29 what the
    request takes from the pool, padding included (bytes per block × its blocks,
    `_max_memory_usage_bytes_from_groups`); before, Σ layers max_memory_usage_bytes over
    each worker's layers, or the whole model's in 0.14–0.16."""
    assert isinstance(pool, VllmPool)
    if since(engine.version, POOL_NEED_SINCE):
        return pool.at_startup().bytes_for
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
