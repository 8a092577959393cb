"""`plan()`: the one entry point the API, CLI and page share. PlanRequest in, Plan out.

Where each number comes from (one hop from here):
  model shape ........ model.shape_from_config      engine rules ....... engines.ENGINE_RULES
  bytes per token .... kv.bytes_per_token           per-rank shapes .... parallel.rank_layouts
  window caps ........ kv.tokens_kept               paging ............. kv.request_paged_kv_bytes
  blocks, null block . capacity.build_pool          vLLM groups ........ capacity.vllm_groups
  vLLM over PP stages  capacity.vllm_pipeline_pool
  decode floor ....... bounds.read_seconds          Amdahl what-if ..... bounds.amdahl_speedup
  intensity .......... bounds.decode_attention_intensity
  prefill/decode work  bounds.positions_processed    prefill FLOPs ...... bounds.prefill_flops
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Protocol

from planner.core import schema as s
from planner.core.bounds import (
    StepFloor,
    amdahl_speedup,
    decode_attention_intensity,
    positions_processed,
    prefill_flops,
    read_seconds,
)
from planner.core.capacity import Pool, build_pool, vllm_pipeline_pool
from planner.core.engines import EngineRules, SlidingPolicy, engine_rules
from planner.core.errors import FieldError, UnknownIdError
from planner.core.kv import (
    bytes_per_token,
    layer_bytes_per_token,
    page_bytes,
    request_kv_bytes,
    request_paged_kv_bytes,
    tokens_kept,
)
from planner.core.model import (
    ModelShape,
    Stack,
    estimate_parameters,
    shape_from_config,
    with_windows,
)
from planner.core.parallel import RankLayout, rank_layouts, stage_layer_specs
from planner.core.units import KVDtype, fmt_gib, fmt_tbps, kv_dtype


class CalibrationLike(Protocol):
    """What `plan()` needs from a stored probe result (planner.probe / planner.store)."""

    @property
    def id(self) -> Any: ...
    @property
    def device_name(self) -> str: ...
    @property
    def measured_at(self) -> Any: ...
    @property
    def decode_bandwidth_bytes_per_s(self) -> float: ...
    @property
    def copy_bandwidth_bytes_per_s(self) -> float: ...
    @property
    def fixed_overhead_seconds(self) -> float: ...


@dataclass(frozen=True, slots=True)
class _Gpu:
    id: str | None
    name: str
    memory_bytes: int
    bandwidth_bytes_per_s: float
    bf16_dense_flops: float | None


@dataclass(frozen=True, slots=True)
class _Model:
    shape: ModelShape
    num_parameters: int | None
    weights_bytes: int | None
    notes: tuple[str, ...]


@lru_cache(maxsize=256)
def _catalog_model(model_id: str) -> _Model:
    # The catalog is static package data (like a constant table), not runtime I/O; shapes of
    # its entries are resolved once.
    from planner.catalog import get_model

    entry = get_model(model_id)
    shape = shape_from_config(entry.config, model_id=entry.id, num_parameters=entry.num_parameters)
    return _Model(shape, entry.num_parameters, entry.resolved_weights_bytes, tuple(entry.notes))


def _resolve_model(request: s.PlanRequest) -> _Model:
    if isinstance(request.model, str):
        return _catalog_model(request.model)
    shape = shape_from_config(request.model)
    params = estimate_parameters(shape)
    notes: tuple[str, ...] = ()
    if params is not None:
        notes = (
            f"Parameter count estimated from the config: {params:,} (every expert counted for "
            "mixture-of-experts; weights at 2 bytes each — set weights_bytes for quantized or "
            "tied-embedding checkpoints).",
        )
    weights = params * 2 if params is not None else None
    return _Model(shape, params, weights, notes)


def _resolve_gpu(request: s.PlanRequest) -> _Gpu | None:
    g = request.gpu
    if g is None:
        return None
    if isinstance(g, s.GpuSpec):
        return _Gpu(None, g.name, g.memory_bytes, g.bandwidth_bytes_per_s, g.bf16_dense_flops)
    from planner.catalog import get_gpu

    entry = get_gpu(g)
    return _Gpu(
        entry.id,
        entry.name,
        entry.usable_memory_bytes,
        entry.bandwidth_bytes_per_s,
        entry.bf16_dense_flops,
    )


def _resolve_dtype(
    request: s.PlanRequest, shape: ModelShape, rules: EngineRules, notes: list[str]
) -> KVDtype:
    if request.kv_cache_dtype.strip().lower() != "auto":
        return kv_dtype(request.kv_cache_dtype)
    name = shape.dtype
    if not shape.dtype_from_config:
        notes.append("The config gives no torch_dtype; kv_cache_dtype auto assumed bf16.")
    if name == "fp32" and rules.name != "transformers":
        notes.append(
            f"{rules.label} serves float32 checkpoints in 16 bits, so kv_cache_dtype "
            "auto resolves to bf16 here."
        )
        name = "bf16"
    return kv_dtype(name)


def _formula(shape: ModelShape, dtype: KVDtype, per_token: int) -> str:
    b = f"{dtype.bytes_per_element:g}"
    if shape.is_mla:
        return (
            f"{shape.num_hidden_layers} × ({shape.kv_lora_rank} + "
            f"{shape.qk_rope_head_dim or 0}) × {b} B = {per_token:,} B "
            "(MLA: one latent per layer-token, no ×2, no head factor)"
        )
    first = shape.layers[0]
    if all(
        x.kv_heads == first.kv_heads
        and x.head_size_k == first.head_size_k
        and x.head_size_v == first.head_size_v
        for x, _ in shape.stack
    ):
        n = shape.num_hidden_layers
        if first.head_size_k == first.head_size_v:
            core = f"2 × {n} × {first.kv_heads} × {first.head_size_k} × {b} B"
        else:
            core = f"{n} × {first.kv_heads} × ({first.head_size_k} + {first.head_size_v}) × {b} B"
        if dtype.scale_bytes_per_token_head:
            core += f" + {n} × {first.kv_heads} × {dtype.scale_bytes_per_token_head} B scales"
        return f"{core} = {per_token:,} B"
    parts = [f"{g.layers} × {layer_bytes_per_token(g.spec, dtype):,} B" for g in shape.groups]
    return " + ".join(parts) + f" = {per_token:,} B"


def _context(request: s.PlanRequest, shape: ModelShape) -> int:
    if request.context_tokens is not None:
        return request.context_tokens
    if request.requests:
        return max(r.context_tokens for r in request.requests)
    if shape.max_position_embeddings is not None:
        return min(shape.max_position_embeddings, s.MAX_TOKENS)
    raise FieldError(
        "context_tokens",
        "the config has no max_position_embeddings; set context_tokens (e.g. 8192) or requests",
    )


def _shared_prefix_tokens(prefix: int, block: int, rules: EngineRules, enabled: bool) -> int:
    """Tokens of a shared prefix the engine stores once (vLLM/TRT-LLM: whole blocks only)."""
    if not enabled or rules.prefix_granularity == "none":
        return 0
    if rules.prefix_granularity == "block":
        return prefix // block * block
    return prefix


def _prefix_saved_bytes(stack: Stack, dtype: KVDtype, shared_tokens: int, copies_saved: int) -> int:
    """Bytes not stored twice: shared tokens in full-attention and MLA layers only (vLLM shares
    no sliding-window blocks across requests in this model)."""
    per_token = sum(
        n * layer_bytes_per_token(x, dtype) for x, n in stack if x.kind in ("full", "mla")
    )
    return shared_tokens * per_token * copies_saved


def _stage_kv_bytes(
    layout: RankLayout,
    dtype: KVDtype,
    mixes: Sequence[s.RequestMix],
    policy: SlidingPolicy,
    shared: Sequence[int],
) -> int:
    total = 0
    for mix, sh in zip(mixes, shared, strict=True):
        total += mix.count * request_kv_bytes(layout.stack, dtype, mix.context_tokens, policy)
        total -= _prefix_saved_bytes(layout.stack, dtype, sh, mix.count - 1)
    return total


def plan(request: s.PlanRequest, *, calibration: CalibrationLike | None = None) -> s.Plan:
    """Plan one request. Raises `PlanError` subclasses naming the offending field."""
    notes: list[str] = []
    rules = engine_rules(request.engine)
    model = _resolve_model(request)
    shape = model.shape
    notes.extend(model.notes)
    tp, pp = request.tensor_parallel_size, request.pipeline_parallel_size
    rules.validate_parallel(shape, tp, pp)
    dtype = _resolve_dtype(request, shape, rules, notes)
    gpu = _resolve_gpu(request)
    if request.calibration_id is not None and (
        calibration is None or str(calibration.id) != request.calibration_id
    ):
        raise UnknownIdError(
            "calibration_id",
            f"no calibration {request.calibration_id!r}; list them with GET /api/v1/calibrations",
        )

    notes.extend(rules.notes)
    if dtype.note:
        notes.append(dtype.note)

    # Block size: as given (with a note when the engine would force another), else the default.
    if rules.name == "transformers":
        if request.block_size not in (None, 1):
            notes.append("transformers has no paged cache: block_size is ignored (1 token).")
        block = 1
    else:
        block = request.block_size or rules.default_block_size
    if shape.is_mla and rules.name == "vllm":
        notes.append(
            "vLLM's MLA backends force the block size on CUDA: FlashMLA (Hopper) a "
            "multiple of 64, CUTLASS MLA (Blackwell) 128; block size changes rounding "
            f"only, not bytes per token (using {block})."
        )
    mnbt = request.max_num_batched_tokens or rules.default_max_num_batched_tokens(
        gpu.memory_bytes if gpu else None, (gpu.id, gpu.name) if gpu else ()
    )
    policy = rules.sliding_policy(shape, request.hybrid_kv_cache_manager)
    if request.max_attention_window is not None:
        if rules.name != "trtllm":
            raise FieldError(
                "max_attention_window",
                "only TensorRT-LLM takes max_attention_window; vLLM and SGLang read each "
                "layer's window from the model config (omit the field)",
            )
        # The windows are explicit: the list (repeated over the layers) decides which layers
        # keep a cyclic window; max_seq_len is the longest request planned here.
        longest_planned = max(
            [request.context_tokens or 0] + [m.context_tokens for m in request.requests or []]
        )
        shape = with_windows(
            shape,
            request.max_attention_window,
            longest_planned or shape.max_position_embeddings or s.MAX_TOKENS,
        )
    elif rules.name == "trtllm" and shape.has_window:
        # Unset max_attention_window: the PyTorch backend sizes every layer for max_seq_len
        # (resource_manager.py); only some models fill the windows in automatically.
        policy = "full_length"
    if shape.has_window:
        notes.append(_window_note(rules, policy, mnbt))
        if policy == "vllm_admission" and any(x.kind == "chunked" for x in shape.layers):
            notes.append(
                "Chunked local attention (Llama-4): vLLM releases whose "
                "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 0 turn the "
                "hybrid KV cache manager off for it (every layer full length); model those "
                "with hybrid_kv_cache_manager=false."
            )
        if rules.name == "vllm" and not request.hybrid_kv_cache_manager and policy != "full_length":
            notes.append(
                "hybrid_kv_cache_manager=false changes nothing for this model: all its layers "
                "share one window spec, and vLLM rewrites windows as full attention only when "
                "full-attention layers are present too (unify_hybrid_kv_cache_specs)."
            )

    ctx = _context(request, shape)
    if shape.max_position_embeddings and ctx > shape.max_position_embeddings:
        notes.append(
            f"context_tokens {ctx:,} exceeds the model's max_position_embeddings "
            f"{shape.max_position_embeddings:,}; engines refuse a max_model_len beyond "
            "it unless RoPE scaling allows it."
        )
    mixes: list[s.RequestMix] = list(request.requests or [s.RequestMix(context_tokens=ctx)])

    # Logical bytes: whole model, one copy, TP=1 heads.
    logical = shape.stack
    per_token = bytes_per_token(logical, dtype)
    prefix_on = (
        request.enable_prefix_caching
        if request.enable_prefix_caching is not None
        else rules.prefix_caching_default
    )
    shared = [_shared_prefix_tokens(m.prefix_tokens, block, rules, prefix_on) for m in mixes]
    if any(m.prefix_tokens for m in mixes):
        notes.append(_prefix_note(rules, prefix_on, block))

    request_rows: list[s.RequestOut] = []
    kv_total = paged_total = saved_total = 0
    for mix, sh in zip(mixes, shared, strict=True):
        kv_one = request_kv_bytes(logical, dtype, mix.context_tokens, policy)
        blocks, paged_one = request_paged_kv_bytes(
            logical, dtype, mix.context_tokens, policy, block
        )
        saved = _prefix_saved_bytes(logical, dtype, sh, mix.count - 1)
        kv_total += mix.count * kv_one - saved
        paged_total += mix.count * paged_one - saved
        saved_total += saved
        request_rows.append(
            s.RequestOut(
                context_tokens=mix.context_tokens,
                count=mix.count,
                prefix_tokens=mix.prefix_tokens,
                kv_bytes=kv_one,
                blocks=blocks,
                paged_kv_bytes=paged_one,
            )
        )
    longest = max(m.context_tokens for m in mixes)
    n_requests = sum(m.count for m in mixes)
    padded_total = n_requests * request_kv_bytes(logical, dtype, longest, policy)

    layouts = rank_layouts(shape, rules, tp, pp)
    stage_bytes = [_stage_kv_bytes(lay, dtype, mixes, policy, shared) for lay in layouts]
    big = max(range(len(layouts)), key=lambda i: (stage_bytes[i], layouts[i].layers))
    lay = layouts[big]
    if lay.replication > 1:
        what = "the MLA latent" if shape.is_mla else "each KV head"
        notes.append(
            f"tensor_parallel_size {tp} > KV heads {shape.num_key_value_heads}: "
            f"{what} is held by {lay.replication} ranks, so physical bytes exceed "
            "logical bytes."
            if not shape.is_mla
            else f"MLA: {what} is replicated on all {tp} ranks (not sharded by TP)."
        )
    if rules.name == "trtllm" and not shape.is_mla and tp > shape.num_key_value_heads:
        est = sum(n * 2 * (x.head_size_k * x.kv_heads // tp) * dtype.bits // 8 for x, n in logical)
        notes.append(
            f"TensorRT-LLM's estimator divides head_dim × Hkv by tp ({est:,} B/token "
            "per rank) while its allocator keeps ceil(Hkv/tp) heads; kvplan follows the "
            "allocator."
        )
    per_rank = s.PerRankOut(
        kv_heads=lay.kv_heads,
        replication=lay.replication,
        layers=lay.layers,
        kv_bytes_per_token=bytes_per_token(lay.stack, dtype),
        page_bytes=page_bytes(lay.first, dtype, block),
        pipeline_stage_layers=[x.layers for x in layouts],
    )
    totals = s.TotalsOut(
        kv_bytes=kv_total,
        paged_kv_bytes=paged_total,
        padded_kv_bytes=padded_total,
        per_rank_kv_bytes=stage_bytes[big],
        physical_kv_bytes=sum(b * tp for b in stage_bytes),
        prefix_shared_bytes_saved=saved_total,
        requests=n_requests,
    )

    weights_total = (
        request.weights_bytes if request.weights_bytes is not None else model.weights_bytes
    )
    capacity, pool = _capacity(
        request,
        rules,
        layouts,
        dtype,
        block,
        policy,
        mnbt,
        ctx,
        gpu,
        weights_total,
        mixes,
        shape,
        notes,
        shared,
    )
    bounds = _bounds(
        request,
        shape,
        model,
        dtype,
        layouts,
        mixes,
        shared,
        policy,
        gpu,
        weights_total,
        capacity,
        pool,
        ctx,
        block,
        calibration,
        tp,
        pp,
        notes,
    )
    generation = None
    if request.output_tokens is not None:
        without, with_cache = positions_processed(ctx, request.output_tokens)
        generation = s.GenerationOut(
            prompt_tokens=ctx,
            output_tokens=request.output_tokens,
            positions_without_cache=without,
            positions_with_cache=with_cache,
            decode_steps=max(0, request.output_tokens - 1),
        )

    return s.Plan(
        engine=rules.name,
        kv_cache_dtype=dtype.name,
        bytes_per_element=dtype.bytes_per_element,
        bits_per_element=dtype.bits,
        block_size=block,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        max_num_batched_tokens=mnbt if rules.name == "vllm" else None,
        kv_bytes_per_token=per_token,
        kv_bytes_per_token_formula=_formula(shape, dtype, per_token),
        model=_model_out(shape),
        per_rank=per_rank,
        requests=request_rows,
        totals=totals,
        capacity=capacity,
        bounds=bounds,
        generation=generation,
        notes=notes,
    )


def _model_out(shape: ModelShape) -> s.ModelOut:
    return s.ModelOut(
        id=shape.id,
        model_type=shape.model_type,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=1 if shape.is_mla else shape.num_key_value_heads,
        head_dim=shape.head_dim,
        max_position_embeddings=shape.max_position_embeddings,
        dtype=shape.dtype,
        groups=[
            s.GroupOut(
                kind=g.spec.kind,
                layers=g.layers,
                layer_indices=list(g.layer_indices),
                window_tokens=g.spec.window_tokens,
                kv_heads=g.spec.kv_heads,
                head_size_k=g.spec.head_size_k,
                head_size_v=g.spec.head_size_v,
            )
            for g in shape.groups
        ],
    )


def _same_device(measured: str, *names: str | None) -> bool:
    """Whether a calibration's device and the plan's GPU share a model token (H100, MI300X…)."""

    def tokens(text: str) -> set[str]:
        return set(re.findall(r"[a-z]+\d+[a-z]*", text.lower()))

    wanted = set().union(*(tokens(n) for n in names if n))
    return bool(tokens(measured) & wanted)


def _iso(value: Any) -> str:
    """RFC 3339 as the API prints it (UTC as `Z`)."""
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return str(value)


def _window_note(rules: EngineRules, policy: SlidingPolicy, mnbt: int) -> str:
    if policy == "vllm_admission":
        return (
            "vLLM budgets each sliding-window request cdiv(min(W − 1 + "
            f"max_num_batched_tokens, ctx), block_size) + 1 blocks (max_num_batched_tokens "
            f"= {mnbt:,}), so at short contexts SWA can admit fewer requests than full "
            "attention; hybrid groups are padded to a common size."
        )
    if policy == "full_length" and rules.name == "trtllm":
        return (
            "TensorRT-LLM sizes every layer for the full sequence unless "
            "KvCacheConfig.max_attention_window is set (set max_attention_window to model the "
            "windows); since TensorRT-LLM PR #6768 out-of-window blocks are detached to host "
            "memory rather than reused in a rolling buffer [version]."
        )
    if policy == "full_length" and rules.name == "vllm":
        return (
            "hybrid KV cache manager disabled: vLLM gives every sliding layer a full-length cache."
        )
    if policy == "full_length":
        return (
            f"{rules.label} gives sliding-window layers a full-length cache for this "
            "architecture (its SWA pools cover only Llama-4, gpt-oss and a few others)."
        )
    if policy == "sglang_swa_pool":
        return (
            "SGLang hybrid SWA pools: the SWA pool holds swa_full_tokens_ratio 0.8 × the "
            "full pool's tokens."
        )
    if policy == "cyclic":
        return (
            "TensorRT-LLM keeps a cyclic buffer of the last W tokens in sliding layers; "
            "its per-window memory split is version-dependent (approximated per layer)."
        )
    return "transformers keeps the last sliding_window − 1 tokens in sliding layers."


def _prefix_note(rules: EngineRules, enabled: bool, block: int) -> str:
    if rules.prefix_granularity == "none":
        return (
            "transformers has no cross-request prefix cache: shared prefixes are stored per "
            "request."
        )
    if not enabled:
        return "Prefix caching is off: shared prefixes are stored once per request."
    if rules.prefix_granularity == "block":
        return (
            f"{rules.label} caches prefixes in whole blocks: a shared prefix is stored once, "
            f"rounded down to a multiple of block_size {block}; full-attention layers only."
        )
    return f"{rules.label}'s radix cache stores a shared prefix once, token by token."


def _budget(
    request: s.PlanRequest,
    rules: EngineRules,
    gpu: _Gpu | None,
    weights_total: int | None,
    tp: int,
    pp: int,
    notes: list[str],
) -> s.BudgetOut | None:
    if request.kv_budget_bytes is not None:
        return s.BudgetOut(
            source="explicit",
            gpu=gpu.id or gpu.name if gpu else None,
            gpu_memory_bytes=gpu.memory_bytes if gpu else None,
            gpu_memory_utilization=None,
            weights_bytes_per_rank=None,
            reserve_bytes=None,
            kv_budget_bytes=request.kv_budget_bytes,
            derivation=f"kv_budget_bytes given: {fmt_gib(request.kv_budget_bytes)}",
        )
    if gpu is None:
        return None
    if weights_total is None:
        raise FieldError(
            "weights_bytes",
            "cannot derive a KV budget from the GPU without the "
            "weight size; set weights_bytes (0 for KV only) or kv_budget_bytes",
        )
    util = request.gpu_memory_utilization or rules.default_memory_utilization
    if rules.memory_base == "free_after_load" and util >= 1:
        # KVCacheManager.calculate_max_num_blocks asserts free_mem_fraction < 1.0.
        raise FieldError(
            "gpu_memory_utilization",
            f"{rules.label}'s free_gpu_memory_fraction must be below 1.0 (got {util:g}); "
            "its default is 0.9",
        )
    weights = -(-weights_total // (tp * pp))
    reserve = (
        request.reserve_bytes if request.reserve_bytes is not None else rules.default_reserve_bytes
    )
    mem = gpu.memory_bytes
    if rules.memory_base == "free_after_load":
        budget = math.floor((mem - weights - reserve) * util)
        how = (
            f"({fmt_gib(mem)} − weights {fmt_gib(weights)} − reserve {fmt_gib(reserve)}) × "
            f"free_gpu_memory_fraction {util:g}"
        )
    else:
        requested = math.ceil(mem * util)
        budget = requested - weights - reserve
        label = {
            "total": "gpu_memory_utilization",
            "free_before_load": "mem_fraction_static",
            "none": "fraction",
        }[rules.memory_base]
        how = (
            f"{fmt_gib(mem)} × {label} {util:g} − weights {fmt_gib(weights)} − reserve "
            f"{fmt_gib(reserve)}"
        )
    if request.reserve_bytes is None:
        notes.append(
            f"reserve_bytes defaulted to {fmt_gib(reserve)} (activation peak, "
            "NCCL/cuBLAS, CUDA graphs); the engine measures these at start-up — take "
            "them from its log (kvplan reconcile) for an exact budget."
        )
    budget = max(0, budget)
    return s.BudgetOut(
        source="gpu",
        gpu=gpu.id or gpu.name,
        gpu_memory_bytes=mem,
        gpu_memory_utilization=util,
        weights_bytes_per_rank=weights,
        reserve_bytes=reserve,
        kv_budget_bytes=budget,
        derivation=f"{how} = {fmt_gib(budget)} per GPU",
    )


def _limiting_pool(
    rules: EngineRules,
    shape: ModelShape,
    layouts: list[RankLayout],
    tp: int,
    pp: int,
    dtype: KVDtype,
    block: int,
    policy: SlidingPolicy,
    budget_bytes: int,
    mnbt: int,
    ctx: int,
) -> Pool:
    """The pool of the pipeline stage that limits capacity (engines take the minimum over
    workers). vLLM builds its KV-cache groups once for the whole model, so its stages are
    sized together (capacity.vllm_pipeline_pool); other engines size each stage's layers."""
    if rules.name == "vllm" and pp > 1:
        # One stage is the whole model: its grouping is build_pool's (no per-layer walk).
        stages = stage_layer_specs(shape, rules, tp, pp)
        return vllm_pipeline_pool(rules, stages, dtype, block, policy, budget_bytes, mnbt)
    pools = [
        build_pool(rules, lay.stack, dtype, block, policy, budget_bytes, mnbt) for lay in layouts
    ]
    return min(pools, key=lambda p: p.max_requests(ctx))


def _capacity(
    request: s.PlanRequest,
    rules: EngineRules,
    layouts: list[RankLayout],
    dtype: KVDtype,
    block: int,
    policy: SlidingPolicy,
    mnbt: int,
    ctx: int,
    gpu: _Gpu | None,
    weights_total: int | None,
    mixes: Sequence[s.RequestMix],
    shape: ModelShape,
    notes: list[str],
    shared: list[int],
) -> tuple[s.CapacityOut | None, Pool | None]:
    budget = _budget(
        request,
        rules,
        gpu,
        weights_total,
        request.tensor_parallel_size,
        request.pipeline_parallel_size,
        notes,
    )
    if budget is None:
        return None, None
    pool = _limiting_pool(
        rules,
        shape,
        layouts,
        request.tensor_parallel_size,
        request.pipeline_parallel_size,
        dtype,
        block,
        policy,
        budget.kv_budget_bytes,
        mnbt,
        ctx,
    )
    max_req = pool.max_requests(ctx)
    reported = pool.reported_concurrency(ctx)
    if max_req == 0:
        limited = (
            "weights_exceed_memory" if budget.kv_budget_bytes == 0 else "budget_below_one_request"
        )
    elif shape.max_position_embeddings and ctx > shape.max_position_embeddings:
        limited = "context_exceeds_max_position_embeddings"
    else:
        limited = {
            "vllm": "kv_blocks",
            "trtllm": "kv_blocks",
            "sglang": "kv_tokens",
            "transformers": "kv_bytes",
        }[rules.name]
    names = (gpu.id, gpu.name) if gpu else ()
    cap = request.max_num_seqs or rules.default_max_num_seqs(
        gpu.memory_bytes if gpu else None,
        names,
        pool.max_tokens(),
        shape.max_position_embeddings or ctx,
    )
    running = min(max_req, cap) if cap is not None else max_req
    if cap is not None and max_req > cap:
        limited = "max_num_seqs"
        flag = {
            "vllm": "--max-num-seqs",
            "sglang": "--max-running-requests",
            "trtllm": "max_batch_size",
        }.get(rules.name, "max_num_seqs")
        notes.append(
            f"Memory holds {max_req:,} requests of {ctx:,} tokens, but {rules.label} runs at "
            f"most {cap:,} at once ({flag}"
            + (", its default" if request.max_num_seqs is None else "")
            + "); raise it to use the memory."
        )
    if reported is not None and max_req != math.floor(reported):
        notes.append(
            f"vLLM's log will say \"Maximum concurrency for {ctx:,} tokens per request: "
            f'{reported:.2f}x", but block 0 is the reserved null block, so '
            f"{max_req} {'request' if max_req == 1 else 'requests'} of {ctx:,} tokens can hold "
            "all their blocks at once."
        )
    if max_req == 0 and budget.kv_budget_bytes == 0:
        notes.append(
            "No memory is left for the KV cache after weights and reserves: use more "
            "GPUs (tensor_parallel_size), a larger GPU, or quantized weights."
        )
    fits: bool | None = None
    if request.requests:
        fits = pool.fits([(m.context_tokens, m.count) for m in mixes], shared)
    longest = pool.longest_context()
    if shape.max_position_embeddings and longest > shape.max_position_embeddings:
        notes.append(
            f"Memory would admit one request of {longest:,} tokens, more than the "
            f"model's max_position_embeddings {shape.max_position_embeddings:,}."
        )
    out = s.CapacityOut(
        kv_budget_bytes=budget.kv_budget_bytes,
        num_blocks=pool.num_blocks,
        reserved_blocks=pool.reserved_blocks,
        blocks_per_request=pool.blocks_per_request(ctx),
        max_requests=max_req,
        max_num_seqs=cap,
        max_running_requests=running,
        max_tokens=pool.max_tokens(),
        engine_reported_concurrency=reported,
        engine_reported_tokens=pool.reported_tokens(),
        context_tokens=ctx,
        limited_by=limited,
        longest_context_tokens=longest,
        kv_groups=[
            s.KVGroupOut(
                kind=g.kind,
                layers=g.layers,
                padding_layers=g.padding_layers,
                window_tokens=g.spec.window_tokens,
                block_size=g.block_size,
                blocks_per_request=(
                    g.blocks_needed(ctx, mnbt)
                    if rules.name == "vllm"
                    else -(-tokens_kept(g.spec, ctx, policy) // g.block_size)
                ),
            )
            for g in pool.groups
        ],
        budget=budget,
        workload_fits=fits,
    )
    pad = sum(g.padding_layers for g in pool.groups)
    if pad:
        notes.append(
            f"vLLM adds {pad} padding layers to equalise KV-cache groups; they cost "
            "memory but hold nothing."
        )
    return out, pool


def _bounds(
    request: s.PlanRequest,
    shape: ModelShape,
    model: _Model,
    dtype: KVDtype,
    layouts: list[RankLayout],
    mixes: list[s.RequestMix],
    shared: list[int],
    policy: SlidingPolicy,
    gpu: _Gpu | None,
    weights_total: int | None,
    capacity: s.CapacityOut | None,
    pool: Pool | None,
    ctx: int,
    block: int,
    calibration: CalibrationLike | None,
    tp: int,
    pp: int,
    notes: list[str],
) -> s.BoundsOut | None:
    if request.bandwidth_bytes_per_s is not None:
        bw, source = request.bandwidth_bytes_per_s, "request"
    elif gpu is not None:
        bw, source = gpu.bandwidth_bytes_per_s, "gpu"
    elif calibration is not None:
        bw, source = calibration.copy_bandwidth_bytes_per_s, "calibration"
    else:
        return None
    bandwidth_source = source  # where the floor's bandwidth comes from
    if calibration is not None:
        source = "calibration"  # the bounds carry a calibrated estimate (issue 5 contract)
        if gpu is not None and not _same_device(calibration.device_name, gpu.name, gpu.id):
            notes.append(
                f"The calibration was measured on {calibration.device_name}, but this plan is "
                f"for {gpu.name}: its calibrated estimate describes the other device."
            )

    # Batch: the given workload, else as many requests of ctx as fit, else one.
    if request.requests:
        batch = mixes
    elif capacity is not None and capacity.max_running_requests > 0:
        batch = [s.RequestMix(context_tokens=ctx, count=capacity.max_running_requests)]
    else:
        batch = [s.RequestMix(context_tokens=ctx)]
    batch_shared = shared if request.requests else [0] * len(batch)
    n_batch = sum(m.count for m in batch)
    weights = weights_total or 0
    weights_stage = weights / (tp * pp)

    def kv_read_bytes(mix: Sequence[s.RequestMix], sh: Sequence[int]) -> int:
        """One decode step reads every stage's KV of every request once."""
        return sum(_stage_kv_bytes(lay, dtype, mix, policy, sh) for lay in layouts)

    def floor_for(kv: int) -> StepFloor:
        return StepFloor(read_seconds(kv, bw), read_seconds(round(weights_stage * pp), bw))

    batch_kv = kv_read_bytes(batch, batch_shared)
    floor = floor_for(batch_kv)
    if pp > 1:
        notes.append(
            "Pipeline parallel: one token passes every stage in turn, so the decode "
            "floor sums the stages' reads."
        )
    if weights_total is None:
        notes.append("Weights size unknown: the decode floor counts KV reads only.")

    main = shape.layers[0]
    b_head = dtype.bytes_for(main.head_size_k + main.head_size_v) + (
        dtype.scale_bytes_per_token_head // (2 if shape.is_mla else 1)
    )
    intensity = decode_attention_intensity(
        query_heads_per_kv_head=shape.query_group_size,
        head_size_k=main.head_size_k,
        head_size_v=main.head_size_v,
        bytes_per_token_head=b_head,
        mla=shape.is_mla,
    )
    mha = 2.0 / dtype.bytes_per_element

    pf_flops = pf_seconds = None
    if model.num_parameters:
        pf_flops = prefill_flops(
            num_parameters=model.num_parameters,
            prompt_tokens=ctx,
            layers=shape.num_hidden_layers,
            query_heads=shape.num_attention_heads,
            head_dim=shape.head_dim
            if not shape.is_mla
            else (shape.kv_lora_rank or 0) + (shape.qk_rope_head_dim or 0),
        )
        if gpu is not None and gpu.bf16_dense_flops:
            pf_seconds = pf_flops / (gpu.bf16_dense_flops * tp)

    calibrated = None
    if calibration is not None:
        calls = sum(lay.layers for lay in layouts)
        est = (
            calls * calibration.fixed_overhead_seconds
            + batch_kv / calibration.decode_bandwidth_bytes_per_s
            + weights_stage * pp / calibration.copy_bandwidth_bytes_per_s
        )
        measured = calibration.measured_at
        calibrated = s.CalibratedOut(
            calibration_id=str(calibration.id),
            device_name=calibration.device_name,
            measured_at=_iso(measured),
            decode_bandwidth_bytes_per_s=calibration.decode_bandwidth_bytes_per_s,
            fixed_overhead_seconds=calibration.fixed_overhead_seconds,
            attention_calls=calls,
            decode_step_seconds=est,
            decode_tokens_per_s=n_batch / est if est > 0 else 0.0,
        )
        notes.append(
            f"Calibrated estimate from {calibration.device_name} (measured "
            f"{calibrated.measured_at}): {calls} attention calls × t0 + KV bytes / "
            f"{fmt_tbps(calibration.decode_bandwidth_bytes_per_s)}; the datasheet "
            f"floor at {fmt_tbps(bw)} stays the hard lower bound."
        )

    sweep: list[s.SweepPointOut] = []
    top = max(ctx, shape.max_position_embeddings or ctx, 1024)
    length = 1024
    while length <= min(top, 1 << 20) and len(sweep) < 12:
        pt = floor_for(kv_read_bytes([s.RequestMix(context_tokens=length, count=n_batch)], [0]))
        sweep.append(
            s.SweepPointOut(
                context_tokens=length,
                kv_read_seconds=pt.kv_read_seconds,
                weights_read_seconds=pt.weights_read_seconds,
                attention_share=pt.attention_share,
            )
        )
        length *= 2

    ratio = request.kv_compression_ratio or 0.5
    share = floor.attention_share
    new_step = floor.weights_read_seconds + floor.kv_read_seconds * ratio
    what_if_max = None
    if pool is not None and capacity is not None:
        scaled = _limiting_pool(
            engine_rules(request.engine),
            shape,
            layouts,
            tp,
            pp,
            dtype,
            block,
            pool.policy,
            int(capacity.kv_budget_bytes / ratio),
            pool.mnbt,
            ctx,
        )
        what_if_max = scaled.max_requests(ctx)
    what_if = s.WhatIfOut(
        kv_compression_ratio=ratio,
        attention_share=share,
        decode_step_seconds=new_step,
        speedup=amdahl_speedup(share, ratio),
        max_requests=what_if_max,
    )

    step = floor.step_seconds
    return s.BoundsOut(
        bandwidth_bytes_per_s=bw,
        source=source,
        bandwidth_source=bandwidth_source,
        batch_requests=n_batch,
        kv_read_seconds=floor.kv_read_seconds,
        weights_read_seconds=floor.weights_read_seconds,
        decode_step_seconds=step,
        decode_tokens_per_s=n_batch / step if step > 0 else 0.0,
        arithmetic_intensity_flops_per_byte=intensity,
        arithmetic_intensity_mha_flops_per_byte=mha,
        attention_share=share,
        prefill_flops=pf_flops,
        prefill_compute_seconds=pf_seconds,
        calibrated=calibrated,
        context_sweep=sweep,
        what_if=what_if,
    )


__all__ = ["CalibrationLike", "plan"]
