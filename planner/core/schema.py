"""The contract: `PlanRequest` in, `Plan` out (`POST /api/v1/plan`).

Strict on the way in: unknown fields rejected, no bool→int or str→number coercion, finite floats,
every integer and list bounded so no input can overflow or exhaust memory. Field names are the
tooling contract: add, never rename or drop.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.core.answer import (
    BoundsOut as BoundsOut,
)
from planner.core.answer import (
    BudgetOut as BudgetOut,
)
from planner.core.answer import (
    BudgetTermOut as BudgetTermOut,
)
from planner.core.answer import (
    CalibratedOut as CalibratedOut,
)
from planner.core.answer import (
    CapacityOut as CapacityOut,
)
from planner.core.answer import (
    GenerationOut as GenerationOut,
)
from planner.core.answer import (
    GroupOut as GroupOut,
)
from planner.core.answer import (
    KVGroupOut as KVGroupOut,
)
from planner.core.answer import (
    ModelOut as ModelOut,
)
from planner.core.answer import (
    NoteOut as NoteOut,
)
from planner.core.answer import (
    PerRankOut as PerRankOut,
)
from planner.core.answer import (
    Plan as Plan,
)
from planner.core.answer import (
    RequestOut as RequestOut,
)
from planner.core.answer import (
    SweepPointOut as SweepPointOut,
)
from planner.core.answer import (
    TotalsOut as TotalsOut,
)
from planner.core.answer import (
    WhatIfOut as WhatIfOut,
)
from planner.core.engines import DEFAULT_ENGINE, engine_names

# The response models live in planner.core.answer; the contract is read from here too.
from planner.core.errors import invalid
from planner.core.speculative_schema import SpeculativeConfig

# Bounds chosen so nothing a client sends can overflow an int64 product or allocate much:
# 2**24 tokens (16M) of context, 2**20 requests, 2**50 bytes (1 PiB) of memory.
MAX_TOKENS = 1 << 24
MAX_COUNT = 1 << 20
MAX_BYTES = 1 << 50
MAX_PARALLEL = 1024
MAX_REQUEST_ENTRIES = 256
MAX_BANDWIDTH_BYTES_PER_S = 1e15
MIN_BANDWIDTH_BYTES_PER_S = 1e6  # below it a decode step can overflow a double (null)
MAX_CONFIG_KEYS = 512
# SGLang's state-pool flags: --max-mamba-cache-size slots, --mamba-full-memory-ratio.
MAX_MAMBA_CACHE_SLOTS = 1 << 24
MAX_MAMBA_FULL_MEMORY_RATIO = 1000.0

# The registry is the one list of engine names; the schema only advertises it.
ENGINES: tuple[str, ...] = engine_names()
ModelDtype = Literal["auto", "bfloat16", "float16", "float32", "half"]
MambaSsmDtype = Literal["float32", "bfloat16", "float16"]  # SGLang --mamba-ssm-dtype choices
MAMBA_SSM_DTYPES: tuple[str, ...] = get_args(MambaSsmDtype)

Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS, strict=True)]
Count = Annotated[int, Field(ge=1, le=MAX_COUNT, strict=True)]
Bytes = Annotated[int, Field(ge=0, le=MAX_BYTES, strict=True)]
PositiveBytes = Annotated[int, Field(ge=1, le=MAX_BYTES, strict=True)]
Parallel = Annotated[int, Field(ge=1, le=MAX_PARALLEL, strict=True)]
Bandwidth = Annotated[float, Field(ge=MIN_BANDWIDTH_BYTES_PER_S, le=MAX_BANDWIDTH_BYTES_PER_S)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


class RequestMix(_Strict):
    """`count` requests of `context_tokens` tokens (prompt + generated so far)."""

    context_tokens: Tokens
    count: Count = 1
    prefix_tokens: Annotated[int, Field(ge=0, le=MAX_TOKENS, strict=True)] = Field(
        default=0,
        description="Leading tokens identical across these `count` requests (a shared system "
        "prompt). Engines with prefix caching store them once.",
    )

    @model_validator(mode="after")
    def _prefix_within_context(self) -> RequestMix:
        if self.prefix_tokens > self.context_tokens:
            raise invalid("request.prefix_above_context")
        return self


class GpuSpec(_Strict):
    """A GPU not in the catalog."""

    name: Annotated[str, Field(min_length=1, max_length=100)] = "custom"
    memory_bytes: PositiveBytes
    bandwidth_bytes_per_s: Bandwidth
    bf16_dense_flops: Annotated[float, Field(gt=0, le=1e18)] | None = None
    compute_capability: Annotated[int, Field(ge=10, le=200)] | None = Field(
        default=None,
        description="CUDA compute capability as major × 10 + minor (e.g. 75 for a T4): the "
        "engine's quantization kernels are checked against it.",
    )
    fp8_dense_flops: Annotated[float, Field(gt=0, le=1e18)] | None = None
    link_bandwidth_bytes_per_s: Bandwidth | None = Field(
        default=None,
        description="GPU-to-GPU link, one way per GPU (tensor-parallel all-reduce); default "
        "PCIe 4.0 x16.",
    )
    link_latency_seconds: Annotated[float, Field(gt=0, le=1e-3)] | None = None


class PlanRequest(_Strict):
    model: str | dict[str, Any] = Field(
        description="Catalog id (GET /api/v1/models) or a Hugging Face config.json object."
    )
    engine: Annotated[str, Field(min_length=1, max_length=40)] = Field(
        default=DEFAULT_ENGINE,
        description="Whose sizing rules to follow: " + ", ".join(ENGINES) + ".",
        json_schema_extra={"enum": list(ENGINES)},
    )
    engine_version: Annotated[str, Field(min_length=1, max_length=40)] | None = Field(
        default=None,
        description="The engine release whose rules apply, e.g. '0.33' or '0.19.0' (vLLM 0.9 "
        "to 0.33). Default: the newest release the rules were verified against.",
    )
    async_scheduling: bool | None = Field(
        default=None,
        description="vLLM --async-scheduling. Default: the release's default (on from 0.14).",
    )
    dtype: ModelDtype | None = Field(
        default=None,
        description="The model dtype, vLLM's --dtype (auto = the config's torch_dtype).",
    )
    enforce_eager: bool | None = Field(
        default=None, description="vLLM --enforce-eager (no CUDA graphs)."
    )
    allow_long_max_model_len: bool = Field(
        default=False,
        description="Plan a context beyond the model's maximum, as vLLM does with "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (SGLang: SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1); "
        "otherwise such a request is refused as the engine refuses it.",
    )
    revision: Annotated[str, Field(min_length=1, max_length=100)] | None = Field(
        default=None, description="Hub revision when model is a Hub id."
    )
    kv_cache_dtype: Annotated[str, Field(min_length=1, max_length=40)] = Field(
        default="auto",
        description="auto (the model's dtype), fp32, fp16, bf16, fp8, fp8_e4m3, fp8_e5m2, "
        "int8, int8_per_token_head, fp8_per_token_head, int4.",
    )
    block_size: Annotated[int, Field(ge=1, le=1 << 16, strict=True)] | None = Field(
        default=None,
        description="Tokens per block/page. Default: the engine's (vLLM 16, TensorRT-LLM 32, "
        "SGLang 1).",
    )
    tensor_parallel_size: Parallel = Field(default=1, description="GPUs sharding each layer.")
    pipeline_parallel_size: Parallel = Field(default=1, description="Pipeline stages.")
    max_num_batched_tokens: Tokens | None = Field(
        default=None,
        description="vLLM scheduler chunk, used by sliding-window admission. Default: 8192 on "
        ">= 70 GiB GPUs other than A100 (and with no GPU given), else 2048.",
    )
    requests: Annotated[list[RequestMix], Field(max_length=MAX_REQUEST_ENTRIES)] | None = Field(
        default=None,
        description="The concrete workload; lengths are summed, never padded.",
    )
    context_tokens: Tokens | None = Field(
        default=None,
        description="Tokens per request for 'how many fit'. Default: the longest of requests, "
        "else the model's max_position_embeddings.",
    )
    kv_budget_bytes: Bytes | None = Field(
        default=None,
        description="KV-cache memory per GPU in bytes. Default: derived from gpu, "
        "gpu_memory_utilization, weights and reserves.",
    )
    gpu: Annotated[str, Field(min_length=1, max_length=100)] | GpuSpec | None = Field(
        default=None, description="Catalog id (GET /api/v1/gpus) or a custom GPU object."
    )
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] | None = Field(
        default=None,
        description="vLLM: fraction of total memory (default 0.92); SGLang mem_fraction_static "
        "(default: SGLang's own, from the GPU's memory); TensorRT-LLM "
        "free_gpu_memory_fraction of free memory (0.9).",
    )
    weights_bytes: Bytes | None = Field(
        default=None,
        description="Model weights in bytes (whole model; divided by TP × PP). 0 = KV only. "
        "Default: the catalog's figure or 2 bytes per estimated parameter.",
    )
    reserve_bytes: Bytes | None = Field(
        default=None,
        description="Non-KV memory per GPU besides weights (activation peak, NCCL/cuBLAS, CUDA "
        "graphs). Default: the engine's documented estimate; take it from the engine log.",
    )
    activation_peak_bytes: Bytes | None = Field(
        default=None,
        description="Override the engine's activation peak (vLLM's profile run) per GPU.",
    )
    non_torch_bytes: Bytes | None = Field(
        default=None,
        description="Override non-torch memory per GPU (CUDA context, cuBLAS, NCCL buffers).",
    )
    cuda_graph_bytes: Bytes | None = Field(
        default=None, description="Override the CUDA-graph memory per GPU (vLLM's estimate)."
    )
    bandwidth_bytes_per_s: Bandwidth | None = Field(
        default=None,
        description="Memory bandwidth in decimal bytes/s for the decode floor; overrides "
        "the GPU's datasheet figure.",
    )
    calibration_id: Annotated[str, Field(min_length=1, max_length=64)] | None = Field(
        default=None,
        description="A stored probe result (GET /api/v1/calibrations): adds the calibrated "
        "decode-step estimate beside the datasheet floor.",
    )
    shared_prefix_tokens: Annotated[int, Field(ge=0, le=MAX_TOKENS, strict=True)] = Field(
        default=0,
        description="Leading tokens every request of `requests` shares, across all entries (one "
        "system prompt): stored once for the whole workload. Instead of per-entry prefix_tokens.",
    )
    enable_prefix_caching: bool | None = Field(
        default=None,
        description="Share requests' common prefix_tokens. Default: the engine's (on for vLLM, "
        "SGLang and TensorRT-LLM).",
    )
    hybrid_kv_cache_manager: bool = Field(
        default=True,
        description="vLLM only: false = --disable-hybrid-kv-cache-manager (every layer full).",
    )
    max_num_seqs: Count | None = Field(
        default=None,
        description="Cap on concurrently running requests (vLLM max_num_seqs, SGLang "
        "max_running_requests, TensorRT-LLM max_batch_size). Default: the engine's.",
    )
    max_attention_window: Annotated[list[Tokens], Field(min_length=1, max_length=4096)] | None = (
        Field(
            default=None,
            description="TensorRT-LLM only: KvCacheConfig.max_attention_window (tokens per layer, "
            "repeated over the layers). Unset, TensorRT-LLM gives every layer a full-length cache.",
        )
    )
    kv_compression_ratio: Annotated[float, Field(gt=0, le=1)] | None = Field(
        default=None, description="What-if: KV bytes scaled by this factor (0.5 = halved)."
    )
    output_tokens: Annotated[int, Field(ge=0, le=MAX_TOKENS, strict=True)] | None = Field(
        default=None, description="Tokens to generate, for the prefill-vs-decode work count."
    )
    speculative_config: SpeculativeConfig | None = Field(
        default=None,
        description="vLLM --speculative-config: the draft's KV layers join the cache, each "
        "decoding request reserves its draft and lookahead tokens, and the decode bound counts "
        "accepted tokens.",
    )

    context_length: Tokens | None = Field(
        default=None,
        description="SGLang --context-length: the model length the engine serves (at most the "
        "model's own unless allow_long_max_model_len). vLLM's is context_tokens.",
    )
    chunked_prefill_size: Annotated[int, Field(ge=1, le=MAX_TOKENS, strict=True)] | None = Field(
        default=None,
        description="SGLang --chunked-prefill-size (default: by GPU memory); it sets the "
        "automatic mem_fraction_static.",
    )
    cuda_graph_max_bs: Annotated[int, Field(ge=1, le=1 << 16, strict=True)] | None = Field(
        default=None,
        description="SGLang's decode CUDA-graph max batch, --cuda-graph-max-bs-decode in 0.5.23 "
        "(default: by GPU memory and TP); it sets the automatic mem_fraction_static.",
    )

    max_total_tokens: Tokens | None = Field(
        default=None,
        description="SGLang --max-total-tokens: caps the token pool below what memory allows.",
    )
    swa_full_tokens_ratio: Annotated[float, Field(gt=0, le=1)] | None = Field(
        default=None,
        description="SGLang --swa-full-tokens-ratio: the sliding-window pool's tokens per "
        "full-pool token (default 0.8).",
    )

    mamba_full_memory_ratio: (
        Annotated[float, Field(gt=0, le=MAX_MAMBA_FULL_MEMORY_RATIO)] | None
    ) = Field(
        default=None,
        description="SGLang --mamba-full-memory-ratio: the Mamba/linear-attention state pool's "
        "bytes per byte of KV pool (default 0.9).",
    )
    max_mamba_cache_size: (
        Annotated[int, Field(ge=1, le=MAX_MAMBA_CACHE_SLOTS, strict=True)] | None
    ) = Field(
        default=None,
        description="SGLang --max-mamba-cache-size: the state pool's slots, in place of "
        "--mamba-full-memory-ratio.",
    )
    mamba_ssm_dtype: MambaSsmDtype | None = Field(
        default=None,
        description="SGLang --mamba-ssm-dtype: the recurrent (SSM) state's dtype (default: the "
        "config's mamba_ssm_dtype, else float32).",
    )

    data_parallel_size: Parallel | None = Field(
        default=None,
        description="SGLang --dp-size (vLLM --data-parallel-size): replicas; with SGLang's "
        "enable_dp_attention the attention of each replica runs at TP / data_parallel_size.",
    )
    enable_dp_attention: bool | None = Field(
        default=None, description="SGLang --enable-dp-attention (with data_parallel_size)."
    )

    @model_validator(mode="after")
    def _config_size(self) -> PlanRequest:
        if isinstance(self.model, dict) and len(self.model) > MAX_CONFIG_KEYS:
            raise invalid("request.config_too_many_keys", most=MAX_CONFIG_KEYS)
        return self
