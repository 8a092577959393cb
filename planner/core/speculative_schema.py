"""The speculative-decoding and layer-form parts of the plan contract: vLLM's
`--speculative-config` in; the draft as sized, KV-sharing layers and the decode bound per
accepted token out (used by `schema`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.core.errors import invalid

MAX_CONFIG_KEYS = 512
Parallel = Annotated[int, Field(ge=1, le=1024, strict=True)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


SpeculativeMethod = Literal[
    "eagle", "eagle3", "mtp", "draft_model", "ngram", "dflash", "qwen3_next_mtp", "qwen3_5_mtp"
]
# Older method names vLLM 0.33 still takes and replaces with mtp (SpeculativeConfig: "method
# `...` is deprecated and replaced with mtp").
MTP_METHOD_ALIASES = frozenset({"qwen3_next_mtp", "qwen3_5_mtp"})


class SpeculativeConfig(_Strict):
    """vLLM's `--speculative-config` JSON (the keys that change KV sizing), plus kvplan's
    `acceptance_rate` for the decode bound."""

    method: SpeculativeMethod = Field(
        description="eagle, eagle3 (EAGLE heads), mtp (the model's own multi-token-prediction "
        "layers; qwen3_next_mtp and qwen3_5_mtp are vLLM's older names for it), draft_model "
        "(a smaller model), ngram (prompt lookup: no KV layers), dflash (a block-diffusion "
        "draft filling k tokens at once; vLLM 0.20 and later)."
    )
    model: Annotated[str, Field(min_length=1, max_length=200)] | dict[str, Any] | None = Field(
        default=None,
        description="The draft: a catalog id or its config.json object. Required for eagle, "
        "eagle3, dflash and draft_model; mtp uses the target's own config.",
    )
    num_speculative_tokens: Annotated[int, Field(ge=1, le=64, strict=True)] | None = Field(
        default=None,
        description="Draft tokens proposed per step. Default for mtp: num_nextn_predict_layers; "
        "required otherwise.",
    )
    draft_tensor_parallel_size: Parallel | None = Field(
        default=None,
        description="vLLM's draft TP; only the target's tensor_parallel_size is modelled.",
    )
    prompt_lookup_max: Annotated[int, Field(ge=1, le=1024, strict=True)] | None = Field(
        default=None, description="ngram window (no effect on KV sizing)."
    )
    prompt_lookup_min: Annotated[int, Field(ge=1, le=1024, strict=True)] | None = Field(
        default=None, description="ngram window (no effect on KV sizing)."
    )
    acceptance_rate: Annotated[float, Field(ge=0, le=1)] | None = Field(
        default=None,
        description="kvplan extension, not a vLLM key: the probability that each draft token is "
        "accepted given the ones before it were. Tokens per step = (1 − a^(k+1)) / (1 − a) "
        "for k = num_speculative_tokens; used for the decode bound per accepted token.",
    )

    @model_validator(mode="before")
    @classmethod
    def _mtp_alias(cls, data: Any) -> Any:
        # vLLM replaces the older per-model MTP method names with mtp.
        method = data.get("method") if isinstance(data, dict) else None
        if isinstance(method, str) and method in MTP_METHOD_ALIASES:
            return {**data, "method": "mtp"}
        return data

    @model_validator(mode="after")
    def _config_size(self) -> SpeculativeConfig:
        if isinstance(self.model, dict) and len(self.model) > MAX_CONFIG_KEYS:
            raise invalid("request.draft_config_too_many_keys", most=MAX_CONFIG_KEYS)
        return self


class DraftOut(_Out):
    """The speculative draft as sized: its KV layers (after the target's) and its lookahead."""

    method: str
    model: str | None
    num_speculative_tokens: int
    kv_layers: int
    kv_bytes_per_token: int
    # Tokens past a request's own that vLLM's allocate_slots reserves while it decodes: the k
    # draft tokens being verified plus the drafter's lookahead slots.
    lookahead_tokens: int
    # Tokens kept below each sliding window for a multi-module MTP draft (0 otherwise).
    extra_retained_tokens: int


class SpeculativeBoundsOut(_Out):
    """The decode floor with speculative decoding: one target step verifies k draft tokens per
    request (the same weights and KV read), after k draft steps."""

    num_speculative_tokens: int
    acceptance_rate: float | None
    tokens_per_step: float | None  # mean tokens each request gains per target step
    draft_read_seconds: float  # k draft steps: the draft's KV and weights read k times
    step_seconds: float  # target step + draft steps
    seconds_per_accepted_token: float | None  # per request
    tokens_per_s: float | None  # the whole batch


__all__ = [
    "MTP_METHOD_ALIASES",
    "DraftOut",
    "SpeculativeBoundsOut",
    "SpeculativeConfig",
    "SpeculativeMethod",
]
