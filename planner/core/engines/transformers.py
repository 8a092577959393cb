"""transformers 5.x: DynamicCache, no paging, no prefix sharing, heads sharded by tp_plan
(src/transformers/cache_utils.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from planner.core.capacity import BytesBudgetPool, Pool, groups_of
from planner.core.engines.base import Engine, Scheduling
from planner.core.engines.versions import Releases
from planner.core.errors import FieldError
from planner.core.model import ModelShape, with_layers
from planner.core.notes import Note, note
from planner.core.specs import LayerSpec, WindowPolicy, cdiv, request_kv_bytes
from planner.core.specs_state import StateSpec
from planner.core.units import KVDtype


@dataclass(frozen=True, slots=True)
class BytesPool(BytesBudgetPool):
    """No paging: a request holds exactly its tensors; slots are tokens of the full width."""

    def request_bytes(self, ctx: int) -> int:
        return request_kv_bytes(self.stack, self.dtype, ctx, self.policy)

    def blocks_per_request(self, ctx: int) -> int:
        return cdiv(self.request_bytes(ctx), max(1, self.per_token_bytes))


@dataclass(frozen=True)
class Transformers(Engine):
    name: ClassVar[str] = "transformers"
    label: ClassVar[str] = "transformers"
    releases: ClassVar[Releases] = Releases(first=(5, 0, 0), last=(5, 99, 0), default=(5, 0, 0))
    default_block_size: ClassVar[int] = 1
    memory_base = "none"
    memory_fraction_flag: ClassVar[str] = "fraction"
    running_cap_flag: ClassVar[str] = "batch size"
    prefix_caching_default: ClassVar[bool] = False
    prefix_granularity = "none"
    limited_by_memory: ClassVar[str] = "kv_bytes"
    paged: ClassVar[bool] = False
    serves: ClassVar[bool] = False
    reads_logs: ClassVar[bool] = False
    serves_fp32: ClassVar[bool] = True
    kv_sharing: ClassVar[bool] = True  # Gemma-3n's "reuse" layers are cache-less (dummy) layers
    kv_cache_dtypes: ClassVar[tuple[str, ...]] = (
        "auto", "fp32", "fp16", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2", "int8", "int4",
    )  # fmt: skip

    def default_memory_utilization(self) -> float:
        return 1.0

    def rule_notes(self) -> list[Note]:
        return [note("engine.transformers.rules")]

    def validate_kv_heads(self, hkv: int, hq: int, tp: int) -> None:
        if hkv % tp:
            raise FieldError(
                "tensor_parallel_size", "engine.transformers_tp_kv_heads", hkv=hkv, tp=tp
            )

    def kv_heads_per_rank(self, kv_heads: int, tp: int) -> int:
        return kv_heads // tp  # divisibility checked in validate_kv_heads

    def bind_state(
        self,
        shape: ModelShape,
        *,
        block_size: int,
        kv: KVDtype,
        model_dtype: str,
        tp: int,
        pp: int,
        prefix_caching: bool,
        max_model_len: int,
        num_spec: int = 0,
        async_scheduling: bool | None = None,
    ) -> tuple[ModelShape, int, list[Note]]:
        """LinearAttentionLayer (cache_utils.py): conv_states keep the whole conv kernel in the
        model's dtype; the recurrent state is kept in fp32 (the torch Mamba2 and gated-delta
        implementations compute it in fp32; measured, tests/crosscheck); one copy per request."""
        if tp > 1:
            raise FieldError(
                "tensor_parallel_size",
                "engine.transformers_state_tp",
            )
        bound: dict[LayerSpec, LayerSpec] = {}
        for g in shape.groups:
            if isinstance(g.spec, StateSpec):
                bound[g.spec] = g.spec.bind(
                    model_dtype=model_dtype, num_spec=num_spec, conv_extra=1, recurrent_fp32=True
                )
        layers = tuple(bound.get(x, x) for x in shape.layers)
        first = next(iter(bound.values()))
        assert isinstance(first, StateSpec)
        return with_layers(shape, layers), block_size, [
            note("state.constant", state_bytes=sum(
                g.layers * g.spec.state_bytes for g in with_layers(shape, layers).groups
                if isinstance(g.spec, StateSpec)
            ))
        ]  # fmt: skip

    def block_size(
        self, requested: int | None, shape: ModelShape, kv_dtype: KVDtype
    ) -> tuple[int, list[Note]]:
        notes = [note("block.ignored_no_paging")] if requested not in (None, 1) else []
        return 1, notes

    def window_policy(
        self, shape: ModelShape, *, hybrid_manager: bool, explicit_windows: bool
    ) -> WindowPolicy:
        return "keep_w_minus_1"

    def window_notes(
        self, policy: WindowPolicy, sched: Scheduling, shape: ModelShape, hybrid_manager: bool
    ) -> list[Note]:
        return [note("window.transformers")]

    def stage_pool(
        self,
        stack: tuple[tuple[LayerSpec, int], ...],
        dtype: KVDtype,
        block_size: int,
        policy: WindowPolicy,
        budget_bytes: int,
    ) -> Pool:
        per_token = sum(n * s.bytes_per_token(dtype) for s, n in stack)
        # Attention-free models have no per-token bytes: one slot per byte of state.
        slots = budget_bytes // max(1, per_token)
        return BytesPool(groups_of(stack, 1), slots, 0, 1, stack, dtype, policy, budget_bytes)


__all__ = ["BytesPool", "Transformers"]
