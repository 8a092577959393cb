"""The reconcile contract: a start-up log (+ model, + settings the log lacks) in; logged vs
predicted figures out. Strict like `PlanRequest`: unknown fields rejected, no coercion, bounded.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from planner.core.answer import NoteOut
from planner.core.engines import log_engines
from planner.core.errors import invalid
from planner.core.logs import MAX_LOG_BYTES
from planner.core.schema import MAX_BYTES, MAX_CONFIG_KEYS, MAX_PARALLEL, MAX_TOKENS
from planner.core.speculative_schema import SpeculativeConfig


def _log_engine(name: str) -> str:
    if name not in log_engines():
        raise invalid("request.engine_choices", engines=", ".join(log_engines()))
    return name


LogEngine = Annotated[
    str,
    Field(min_length=1, max_length=40, json_schema_extra={"enum": list(log_engines())}),
    AfterValidator(_log_engine),
]
Status = Literal["equal", "consistent", "different", "not_recomputable"]

_Parallel = Annotated[int, Field(ge=1, le=MAX_PARALLEL, strict=True)]
_Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS, strict=True)]
_Fraction = Annotated[float, Field(gt=0, le=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


class ReconcileSettings(_Strict):
    """Settings the log does not print. Anything given here wins over what the log says."""

    tensor_parallel_size: _Parallel | None = None
    pipeline_parallel_size: _Parallel | None = None
    pipeline_layer_partition: (
        Annotated[list[Annotated[int, Field(ge=1, le=4096, strict=True)]], Field(max_length=64)]
        | None
    ) = Field(default=None, description="Layers per pipeline stage (VLLM_PP_LAYER_PARTITION).")
    block_size: Annotated[int, Field(ge=1, le=1 << 16, strict=True)] | None = Field(
        default=None,
        description="vLLM block_size, SGLang page_size, TensorRT-LLM tokens_per_block.",
    )
    kv_cache_dtype: Annotated[str, Field(min_length=1, max_length=40)] | None = None
    max_model_len: _Tokens | None = None
    max_num_batched_tokens: _Tokens | None = None
    gpu_memory_utilization: _Fraction | None = Field(default=None, description="vLLM.")
    mem_fraction_static: _Fraction | None = Field(default=None, description="SGLang.")
    free_gpu_memory_fraction: _Fraction | None = Field(default=None, description="TensorRT-LLM.")
    hybrid_kv_cache_manager: bool | None = None
    draft_layers: Annotated[int, Field(ge=0, le=64, strict=True)] | None = Field(
        default=None,
        description="Full-attention layers a speculative draft model (EAGLE/MTP) adds to the KV "
        "cache.",
    )
    speculative_config: SpeculativeConfig | None = Field(
        default=None,
        description="vLLM --speculative-config as the server ran (method, model, "
        "num_speculative_tokens): the draft's KV layers join the cache, as in a plan request. "
        "Takes the place of draft_layers.",
    )
    swap_space_bytes: Annotated[int, Field(ge=0, le=MAX_BYTES, strict=True)] | None = Field(
        default=None, description="vLLM v0 CPU swap space (default 4 GiB)."
    )
    gpu: Annotated[str, Field(min_length=1, max_length=100)] | None = Field(
        default=None, description="Catalog GPU id, to turn learned figures into plan reserves."
    )
    gpu_memory_bytes: Annotated[int, Field(ge=1, le=MAX_BYTES, strict=True)] | None = None
    vllm_engine: Literal["v0", "v1"] | None = None
    engine_version: Annotated[str, Field(min_length=1, max_length=40)] | None = Field(
        default=None,
        description="The engine release that wrote the log, when its lines do not say.",
    )
    enable_prefix_caching: bool | None = Field(
        default=None,
        description="vLLM: decides how state (Mamba / linear-attention) layers are cached.",
    )

    @model_validator(mode="after")
    def _one_draft_form(self) -> ReconcileSettings:
        if self.speculative_config is not None and self.draft_layers:
            raise invalid("request.speculative_or_draft_layers")
        return self


class ReconcileRequest(_Strict):
    log: Annotated[str, Field(max_length=MAX_LOG_BYTES)] = Field(
        description="Engine start-up log text (at most 2 MiB, 20,000 lines)."
    )
    model: str | dict[str, Any] | None = Field(
        default=None,
        description="Catalog id or a Hugging Face config.json object; default: the model the "
        "log names, when the catalog has it.",
    )
    engine: LogEngine | None = Field(
        default=None, description="The engine that wrote the log; default: detected."
    )
    settings: ReconcileSettings = Field(default_factory=ReconcileSettings)

    @model_validator(mode="after")
    def _config_size(self) -> ReconcileRequest:
        if isinstance(self.model, dict) and len(self.model) > MAX_CONFIG_KEYS:
            raise invalid("request.config_too_many_keys", most=MAX_CONFIG_KEYS)
        return self


# ---------------------------------------------------------------------------------------------
# Response


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class LoggedLine(_Out):
    line: int
    kind: str
    source: str | None
    text: str


class SettingUsed(_Out):
    name: str
    value: str
    source: Literal["request", "log", "default", "model"]


class Check(_Out):
    """One logged figure beside kvplan's recomputation of it."""

    figure: str
    label: str
    unit: str
    line: int
    logged: float
    predicted: float | None
    predicted_range: list[float] | None = Field(
        default=None, description="What the log's display rounding admits for this figure."
    )
    blocks_range: list[int] | None = Field(
        default=None,
        description="Block (or token) counts the ±half-digit rounding of the logged memory admits.",
    )
    status: Status
    difference: float | None
    difference_pct: float | None
    reason: str | None
    reason_code: str | None = Field(
        default=None, description="The stable code of `reason` (its English template)."
    )
    reason_params: dict[str, Any] | None = Field(
        default=None, description="The values `reason` is formatted from."
    )
    arithmetic: str


class MessageOut(_Out):
    """A message as a stable code and the values its English template is formatted with."""

    code: str
    params: dict[str, Any]


class Reserves(_Out):
    """Figures learned from the log, offered back as inputs for a plan of the same deployment."""

    weights_bytes: int | None = Field(description="Whole model (per-rank × TP × PP).")
    weights_bytes_per_rank: int | None
    reserve_bytes: int | None = Field(
        description="Per GPU, besides weights: activation peak + non-torch memory (the plan's "
        "reserve_bytes)."
    )
    activation_peak_bytes: int | None
    non_torch_bytes: int | None
    cuda_graph_bytes: int | None
    kv_budget_bytes: int | None
    derivation: list[str]
    derivation_detail: list[MessageOut] = Field(
        default_factory=list, description="`derivation`, each line as its code and params."
    )


class Summary(_Out):
    equal: int
    consistent: int
    different: int
    explained: int
    not_recomputable: int


class ReconcileResult(_Out):
    engine: str
    engine_label: str
    log_format: str
    engine_version: str | None
    lines_read: int
    lines_recognised: int
    model: str | None
    settings: list[SettingUsed]
    lines: list[LoggedLine]
    checks: list[Check]
    summary: Summary
    reserves: Reserves | None
    plan_request: dict[str, Any] | None = Field(
        description="A POST /api/v1/plan body for the same deployment, using the learned figures."
    )
    notes: list[str]
    notes_detail: list[NoteOut] = Field(
        default_factory=list, description="The notes, each with its stable code and params."
    )


__all__ = [
    "Check",
    "LogEngine",
    "LoggedLine",
    "ReconcileRequest",
    "ReconcileResult",
    "ReconcileSettings",
    "Reserves",
    "SettingUsed",
    "Status",
    "Summary",
]
