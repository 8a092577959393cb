"""The answer: what `plan()` returns (`POST /api/v1/plan`). Field names are the tooling contract:
add, never rename or drop."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from planner.core.expected_schema import ExpectedOut
from planner.core.speculative_schema import DraftOut, SpeculativeBoundsOut

# ---------------------------------------------------------------------------------------------
# Response


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class GroupOut(_Out):
    kind: Literal["full", "sliding", "chunked", "mla", "indexer", "mamba"]
    layers: int
    layer_indices: list[int]
    window_tokens: int | None
    kv_heads: int
    head_size_k: int
    head_size_v: int
    # State layers ("mamba"): mixer, one request's state in one layer (whole model, before TP).
    mixer: str | None = None
    state_bytes_per_request: int | None = None


class ModelOut(_Out):
    id: str | None
    model_type: str | None
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    max_position_embeddings: int | None
    max_model_len: int | None = None
    dtype: str
    weights_bytes: int | None = None
    weights_source: str | None = None
    num_parameters: int | None = None
    active_parameters: int | None = None
    groups: list[GroupOut]
    kv_shared_layers: list[int] = []  # layers reading another layer's cache (Gemma-3n)
    draft: DraftOut | None = None  # a speculative draft's KV layers, when one is declared


class NoteOut(_Out):
    """One note: a stable `code`, its `params`, and the English `text` they make."""

    code: str
    params: dict[str, str | int | float | bool]
    text: str


class PerRankOut(_Out):
    kv_heads: int
    replication: int
    layers: int
    kv_bytes_per_token: int
    page_bytes: int
    pipeline_stage_layers: list[int]
    # Layers that hold KV per token on this rank (what kv_bytes_per_token sums): attention
    # layers only (state layers hold a constant per request), a draft's layers included.
    kv_layers: int | None = None
    draft_kv_layers: int | None = None


class RequestOut(_Out):
    context_tokens: int
    count: int
    prefix_tokens: int
    kv_bytes: int
    blocks: int
    paged_kv_bytes: int


class TotalsOut(_Out):
    kv_bytes: int
    paged_kv_bytes: int
    padded_kv_bytes: int
    per_rank_kv_bytes: int
    physical_kv_bytes: int
    prefix_shared_bytes_saved: int
    requests: int


class KVGroupOut(_Out):
    """One KV-cache group as the engine builds it (vLLM: layers sharing a block table)."""

    kind: str
    layers: int
    padding_layers: int
    window_tokens: int | None
    block_size: int
    blocks_per_request: int


class BudgetTermOut(_Out):
    """One line of the memory split, with where its bytes come from."""

    name: str
    bytes: int
    derivation: str
    source: str  # model | input | override | engine_rule | not_applicable


class BudgetOut(_Out):
    source: Literal["explicit", "gpu"]
    gpu: str | None
    gpu_memory_bytes: int | None
    gpu_memory_utilization: float | None
    weights_bytes_per_rank: int | None
    reserve_bytes: int | None
    kv_budget_bytes: int
    derivation: str
    activation_peak_bytes: int | None = None
    non_torch_bytes: int | None = None
    cuda_graph_bytes: int | None = None
    cuda_graph_subtracted: bool | None = None
    requested_bytes: int | None = None
    # The engine's own figure, which can be negative ("Available KV cache memory: -2.14 GiB");
    # kv_budget_bytes is that figure floored at 0.
    engine_available_bytes: int | None = None
    terms: list[BudgetTermOut] = []


class CapacityOut(_Out):
    kv_budget_bytes: int
    num_blocks: int
    reserved_blocks: int
    blocks_per_request: int
    max_requests: int
    max_num_seqs: int | None
    max_running_requests: int
    max_tokens: int
    engine_reported_concurrency: float | None
    engine_reported_tokens: int | None
    context_tokens: int
    limited_by: str
    longest_context_tokens: int
    kv_groups: list[KVGroupOut]
    budget: BudgetOut
    workload_fits: bool | None
    engine_starts: bool | None = None
    start_error: str | None = None
    estimated_max_model_len: int | None = None
    # The engine's own estimate of the longest max_model_len (vLLM's estimate_max_model_len):
    # before vLLM 0.29 it counts the null block as free, so it can be one block past
    # longest_context_tokens, the longest context a request is actually admitted with.
    engine_max_model_len_estimate: int | None = None
    # The longest request the engine itself admits, where it states one (SGLang's max_req_len
    # = min(context_len − 1, max_total_num_tokens − 1), tp_worker.get_worker_info).
    engine_max_request_tokens: int | None = None
    # SGLang's second pools: the sliding-window pool's tokens (HybridSWAPoolConfigurator), the
    # Mamba / linear-attention state pool's slots and the bytes one slot holds (every state
    # layer of a rank), as kv_cache_configurator sizes them. None where the engine has none.
    swa_pool_tokens: int | None = None
    state_pool_slots: int | None = None
    state_bytes_per_slot: int | None = None


class CalibratedOut(_Out):
    calibration_id: str
    device_name: str
    measured_at: str
    decode_bandwidth_bytes_per_s: float
    fixed_overhead_seconds: float
    attention_calls: int
    # A validated record's step terms (kvplan probe --validate); None on a plain probe record.
    per_layer_overhead_seconds: float | None = None
    matmul_flops_per_s: float | None = None
    matmul_seconds: float | None = None
    decode_step_seconds: float
    decode_tokens_per_s: float


class SweepPointOut(_Out):
    context_tokens: int
    kv_read_seconds: float
    weights_read_seconds: float
    attention_share: float


class WhatIfOut(_Out):
    kv_compression_ratio: float
    attention_share: float
    decode_step_seconds: float
    speedup: float
    max_requests: int | None


class BoundsOut(_Out):
    bandwidth_bytes_per_s: float
    source: Literal["request", "gpu", "calibration"]
    bandwidth_source: Literal["request", "gpu", "calibration"]
    batch_requests: int
    kv_read_seconds: float
    weights_read_seconds: float
    decode_step_seconds: float
    decode_tokens_per_s: float
    arithmetic_intensity_flops_per_byte: float
    arithmetic_intensity_mha_flops_per_byte: float
    attention_share: float
    prefill_flops: float | None
    prefill_compute_seconds: float | None
    calibrated: CalibratedOut | None
    context_sweep: list[SweepPointOut]
    what_if: WhatIfOut | None
    speculative: SpeculativeBoundsOut | None = None
    # The expected step from fitted constants (planner.core.expected); None without a GPU.
    expected: ExpectedOut | None = None


class GenerationOut(_Out):
    prompt_tokens: int
    output_tokens: int
    positions_without_cache: int
    positions_with_cache: int
    decode_steps: int


class Plan(_Out):
    engine: str
    engine_version: str
    async_scheduling: bool | None = None
    dtype: str
    kv_cache_dtype: str
    bytes_per_element: float
    bits_per_element: int
    block_size: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    max_num_batched_tokens: int | None
    kv_bytes_per_token: int
    kv_bytes_per_token_formula: str
    model: ModelOut
    per_rank: PerRankOut
    requests: list[RequestOut]
    totals: TotalsOut
    capacity: CapacityOut | None
    bounds: BoundsOut | None
    generation: GenerationOut | None
    notes: list[str]
    notes_detail: list[NoteOut]
