"""The recommend contract: model, GPUs, engine and workload in; engine settings and flags out."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from planner.core.answer import NoteOut
from planner.core.engines import DEFAULT_ENGINE, serving_engines
from planner.core.errors import invalid
from planner.core.schema import (
    MAX_BYTES,
    MAX_CONFIG_KEYS,
    MAX_COUNT,
    MAX_PARALLEL,
    MAX_TOKENS,
    GpuSpec,
)


def _serving(name: str) -> str:
    if name not in serving_engines():
        raise invalid("request.engine_choices", engines=", ".join(serving_engines()))
    return name


ServeEngine = Annotated[
    str,
    Field(min_length=1, max_length=40, json_schema_extra={"enum": list(serving_engines())}),
    AfterValidator(_serving),
]
MAX_MIX_CLASSES = 32

_Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS, strict=True)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


class LengthShare(_Strict):
    """A share of requests whose prompt + output is `context_tokens` long."""

    context_tokens: _Tokens
    share: Annotated[float, Field(gt=0, le=1)]


class RecommendRequest(_Strict):
    model: str | dict[str, Any] = Field(description="Catalog id or a config.json object.")
    gpu: Annotated[str, Field(min_length=1, max_length=100)] | GpuSpec = Field(
        description="Catalog GPU id (GET /api/v1/gpus) or {name, memory_bytes, "
        "bandwidth_bytes_per_s}."
    )
    gpu_count: Annotated[int, Field(ge=1, le=MAX_PARALLEL, strict=True)] = 1
    engine: ServeEngine = DEFAULT_ENGINE
    context_mix: Annotated[list[LengthShare], Field(min_length=1, max_length=MAX_MIX_CLASSES)] | (
        None
    ) = Field(default=None, description="e.g. 70% 2k / 20% 8k / 10% 32k; shares sum to 1.")
    max_model_len: _Tokens | None = Field(
        default=None,
        description="Longest request the engine must accept; default: the longest in the mix.",
    )
    concurrency: Annotated[int, Field(ge=1, le=MAX_COUNT, strict=True)] = Field(
        description="Concurrent requests to hold, over all instances."
    )
    tpot_seconds: Annotated[float, Field(gt=0, le=60)] | None = Field(
        default=None,
        description="Time per output token to meet, seconds: checked against the expected "
        "decode step (bounds.expected); a bandwidth floor above it rejects outright.",
    )
    throughput_tokens_per_s: Annotated[float, Field(gt=0, le=1e9)] | None = Field(
        default=None,
        description="Output tokens per second to sustain over all instances at the target "
        "concurrency (concurrency / expected TPOT); the floor rejects what cannot reach it.",
    )
    tail_quantile: Annotated[float, Field(ge=0.5, le=0.999)] = Field(
        default=0.95, description="The concurrency must fit at least this fraction of the time."
    )
    kv_cache_dtype: Annotated[str, Field(min_length=1, max_length=40)] | None = Field(
        default=None, description="Fix the KV dtype; default: auto, then fp8 if auto cannot fit."
    )
    allow_fp8_kv: bool = True
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] | None = None
    block_size: Annotated[int, Field(ge=1, le=1 << 16, strict=True)] | None = None
    max_num_batched_tokens: _Tokens | None = None
    weights_bytes: Annotated[int, Field(ge=0, le=MAX_BYTES, strict=True)] | None = None
    reserve_bytes: Annotated[int, Field(ge=0, le=MAX_BYTES, strict=True)] | None = Field(
        default=None, description="Per-GPU non-KV memory besides weights (e.g. from reconcile)."
    )

    @model_validator(mode="after")
    def _workload(self) -> RecommendRequest:
        if isinstance(self.model, dict) and len(self.model) > MAX_CONFIG_KEYS:
            raise invalid("request.config_too_many_keys", most=MAX_CONFIG_KEYS)
        if self.context_mix is None and self.max_model_len is None:
            raise invalid("request.mix_or_max_model_len")
        if self.context_mix is not None:
            total = sum(c.share for c in self.context_mix)
            if abs(total - 1) > 1e-3:
                raise invalid("request.mix_shares_sum", total=total)
            longest = max(c.context_tokens for c in self.context_mix)
            if self.max_model_len is not None and self.max_model_len < longest:
                raise invalid(
                    "request.max_model_len_below_mix",
                    max_model_len=self.max_model_len,
                    longest=longest,
                )
        return self


# ---------------------------------------------------------------------------------------------
# Response


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class EngineSettings(_Out):
    """The settings, with vLLM's names; `flags` renders them for the chosen engine."""

    tensor_parallel_size: int
    max_model_len: int
    max_num_seqs: int
    gpu_memory_utilization: float
    kv_cache_dtype: str
    block_size: int
    max_num_batched_tokens: int | None = None


class ClassNeed(_Out):
    context_tokens: int
    share: float
    blocks_per_request: int


class WorkloadCapacity(_Out):
    """Concurrency of the length mix on one instance (see planner.core.workload)."""

    usable_blocks: int
    block_tokens: int
    classes: list[ClassNeed]
    mean_blocks_per_request: float
    fluid_concurrency: float
    expected_concurrency: float
    tail_concurrency: int
    tail_quantile: float
    method: Literal["exact", "normal"]
    max_requests_at_max_model_len: int
    longest_context_tokens: int


class Candidate(_Out):
    tensor_parallel_size: int
    kv_cache_dtype: str
    instances: int
    tail_concurrency: int
    expected_concurrency: float
    decode_step_seconds: float | None
    verdict: str
    expected_decode_step_seconds: float | None = None
    expected_tpot_seconds: float | None = None


class Suggestion(_Out):
    change: str
    detail: str


class Recommendation(_Out):
    feasible: bool
    engine: str
    model: str
    gpu: str
    gpu_count: int
    instances: int = Field(description="Engine instances (data-parallel replicas).")
    gpus_used: int
    settings: EngineSettings | None
    command: str | None
    extra_files: dict[str, str] = Field(default_factory=dict)
    capacity: WorkloadCapacity | None
    decode_step_seconds: float | None = Field(
        description="Bandwidth floor of one decode step at the recommended batch (a lower bound)."
    )
    tpot_seconds: float | None
    binding_constraint: str | None
    expected_decode_step_seconds: float | None = Field(
        default=None,
        description="Expected decode step at the recommended batch (fitted constants; never "
        "below decode_step_seconds).",
    )
    expected_tpot_seconds: float | None = None
    throughput_tokens_per_s: float | None = Field(
        default=None, description="Expected output tokens/s over all instances."
    )
    binding_detail: str | None
    binding_detail_code: str | None = Field(
        default=None, description="The stable code of `binding_detail` (its English template)."
    )
    binding_detail_params: dict[str, Any] | None = Field(
        default=None, description="The values `binding_detail` is formatted from."
    )
    nearest: list[Suggestion]
    plan_request: dict[str, Any] | None = Field(
        description="POST /api/v1/plan body for one instance at its share of the workload."
    )
    candidates: list[Candidate]
    notes: list[str]
    notes_detail: list[NoteOut] = Field(
        default_factory=list, description="The notes, each with its stable code and params."
    )


__all__ = [
    "Candidate",
    "ClassNeed",
    "EngineSettings",
    "LengthShare",
    "RecommendRequest",
    "Recommendation",
    "ServeEngine",
    "Suggestion",
    "WorkloadCapacity",
]
