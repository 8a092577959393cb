"""What an engine reads of a plan, as protocols: the resolved inputs (`planner.core.inputs.Inputs`
is one), the request fields its memory rules take, and the settings a launch command prints
(`planner.core.recommend_schema.EngineSettings` is one).

The engines depend on these, never on the modules that build them (which read the registry of
engines): that keeps the engines below the inputs, the schemas and the log reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from planner.core.hardware import Gpu
from planner.core.model import ModelShape
from planner.core.specs import WindowPolicy
from planner.core.units import KVDtype


@dataclass(frozen=True, slots=True)
class Scheduling:
    """The scheduler settings that shape admission, resolved for one plan."""

    max_num_batched_tokens: int
    async_scheduling: bool | None  # None: the engine has no such mode
    in_flight_tokens: int  # tokens scheduled but not yet retired, for window admission
    concurrent_batches: int
    why: str = ""  # why async is on (its default, or the request)
    # Slots a decoding request reserves past its own tokens (speculative decoding: the k draft
    # tokens being verified plus the drafter's lookahead); admission only, never start-up.
    reserved_tokens: int = 0


class MemoryRequest(Protocol):
    """The request fields an engine's memory budget reads (a PlanRequest)."""

    @property
    def gpu_memory_utilization(self) -> float | None: ...
    @property
    def reserve_bytes(self) -> int | None: ...
    @property
    def max_num_seqs(self) -> int | None: ...
    @property
    def enforce_eager(self) -> bool | None: ...
    @property
    def activation_peak_bytes(self) -> int | None: ...
    @property
    def non_torch_bytes(self) -> int | None: ...
    @property
    def cuda_graph_bytes(self) -> int | None: ...


class ModelSource(Protocol):
    """The model as resolved: its config.json where known."""

    @property
    def config(self) -> Mapping[str, Any] | None: ...


class PlanInputs(Protocol):
    """The resolved inputs of one plan that an engine's rules read."""

    @property
    def request(self) -> MemoryRequest: ...
    @property
    def model(self) -> ModelSource: ...
    @property
    def shape(self) -> ModelShape: ...
    @property
    def gpu(self) -> Gpu | None: ...
    @property
    def model_dtype(self) -> str: ...
    @property
    def kv_dtype(self) -> KVDtype: ...
    @property
    def block_size(self) -> int: ...
    @property
    def sched(self) -> Scheduling: ...
    @property
    def tp(self) -> int: ...
    @property
    def pp(self) -> int: ...
    @property
    def context_tokens(self) -> int: ...
    @property
    def policy(self) -> WindowPolicy: ...


class LaunchSettings(Protocol):
    """The settings a launch command prints, with vLLM's names."""

    @property
    def tensor_parallel_size(self) -> int: ...
    @property
    def max_model_len(self) -> int: ...
    @property
    def max_num_seqs(self) -> int: ...
    @property
    def gpu_memory_utilization(self) -> float: ...
    @property
    def kv_cache_dtype(self) -> str: ...
    @property
    def block_size(self) -> int: ...
    @property
    def max_num_batched_tokens(self) -> int | None: ...


__all__ = ["LaunchSettings", "MemoryRequest", "ModelSource", "PlanInputs", "Scheduling"]
