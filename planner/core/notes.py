"""Notes: every assumption and engine quirk an answer carries, each with a stable code.

A note is `(code, params)`; its English text is the code's template formatted with the params.
The page translates by looking the template up in its locale catalog (msgid = the English
template) and formatting the same params, so a note reads in Chinese without parsing English.
Codes are a contract: add new ones, never rename one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from planner.core.notes_bounds import BOUNDS_TEMPLATES
from planner.core.notes_dtype import DTYPE_TEMPLATES
from planner.core.notes_versions import VERSION_TEMPLATES

Param = str | int | float | bool

TEMPLATES: dict[str, str] = {
    # -- engines -----------------------------------------------------------------------------
    "engine.vllm.rules": (
        "vLLM {version} rules (vllm/v1/kv_cache_interface.py, vllm/v1/core/kv_cache_utils.py): "
        "page = block_size × kv_heads × (head_size + head_size_v) × dtype bytes per layer; "
        "num_blocks = budget // page // group_size; block 0 is the null block."
    ),
    "engine.vllm.memory_fraction": (
        "gpu_memory_utilization is a fraction of TOTAL device memory (default {default} in "
        "vLLM {version})."
    ),
    "engine.vllm.async_scheduling": (
        "vLLM {version} schedules asynchronously here ({why}): {in_flight:,} tokens can be in "
        "flight (max_concurrent_batches {batches} × max_num_batched_tokens {mnbt:,}), and "
        "sliding-window admission reserves blocks for them."
    ),
    "engine.sglang.rules": (
        "SGLang rules (python/sglang/srt/mem_cache/memory_pool.py, model_runner.py): cell = "
        "Σ layers kv_heads × (head_dim + v_head_dim) × dtype bytes; max_total_num_tokens = "
        "available // cell, rounded down to a multiple of page_size (default 1: no per-request "
        "rounding)."
    ),
    "engine.sglang.memory_fraction": (
        "mem_fraction_static is a fraction of the free memory measured BEFORE model load; "
        "SGLang computes it from the GPU's memory when not given, and so does kvplan."
    ),
    "engine.sglang.trtllm_mha_page": (
        "On this GPU (SM100) SGLang's default attention backend for the model is trtllm_mha, "
        "which takes pages of 16, 32, 64 or 128 tokens: page_size {asked} becomes {page}."
    ),
    "engine.sglang.triton_hybrid_page": (
        "On this GPU (SM100) SGLang runs this hybrid's attention on the triton backend at page "
        "size 1 (its model override): page_size {asked} becomes 1."
    ),
    "engine.trtllm.rules": (
        "TensorRT-LLM rules (KvCacheConfig, resource_manager.py): tokens_per_block 32; KV heads "
        "per rank = ceil(Hkv / tp) (allocator); num_blocks = max_tokens // tokens_per_block."
    ),
    "engine.trtllm.memory_fraction": (
        "free_gpu_memory_fraction ({default}) applies to FREE memory after weights and "
        "activations, not to total memory."
    ),
    "engine.transformers.rules": (
        "transformers 5.x DynamicCache(config) rules (cache_utils.py): tensors [batch, kv_heads, "
        "seq, head_dim] with no paging; sliding layers keep the last sliding_window − 1 tokens; "
        "DeepSeek MLA caches the latent (kv_lora_rank + qk_rope_head_dim). transformers 4.x "
        "decompressed MLA (≈71× larger for DeepSeek-V3)."
    ),
    "engine.refuses_to_start": "{engine} would not start with these settings: {error}",
    "engine.no_kv_memory": (
        "{engine} would not start: no memory is left for the KV cache with these settings."
    ),
    # -- model and dtype ---------------------------------------------------------------------
    "model.parameters_estimated": (
        "Parameter count estimated from the config: {parameters:,} (every expert counted for "
        "mixture-of-experts; weights at 2 bytes each — set weights_bytes for quantized or "
        "tied-embedding checkpoints)."
    ),
    "model.catalog_parameters": (
        "Weights from the catalog's published parameter count: {parameters:,} parameters × "
        "{bytes_per_parameter:g} B."
    ),
    "model.catalog_weights": "Weights from the published checkpoint size: {weights:,} B.",
    "model.weights_counted": (
        "Weights counted from the config: {weights:,} B (every routed expert once, quantized "
        "layers as stored); set weights_bytes if the checkpoint differs."
    ),
    "model.hub_weights": ("Weights from the checkpoint's safetensors ({source}): {weights:,} B."),
    # A catalog entry's own remark (its text is data, shipped with the entry).
    "model.catalog_note": "{text}",
    **DTYPE_TEMPLATES,  # the model and KV cache dtypes (notes_dtype)
    "weights.served_dtype": (
        "Weights as served in {dtype}: {weights:,} B (the {stored_dtype} checkpoint stores "
        "{stored:,} B)."
    ),
    "kv_dtype.fp8": "fp8 = fp8_e4m3 on CUDA; per-tensor scale, no page overhead.",
    "kv_dtype.int8": "int8 with a per-tensor scale.",
    "kv_dtype.int4": (
        "int4 modelled with a fp32 scale per token and KV head for K and for V (not a vLLM "
        "CacheDType; TensorRT-LLM/LMDeploy-style quantized cache)."
    ),
    "model.kv_shared_layers": (
        "{shared} of {layers} layers read an earlier layer's KV cache (num_kv_shared_layers) and "
        "keep none of their own: {owning} layers are sized."
    ),
    "model.sparse_mla_indexer": (
        "DeepSeek sparse attention: each of the {layers} MLA layers also caches its indexer's "
        "keys ({indexer_bytes} B per token, uint8 whatever the KV dtype); vLLM puts both in one "
        "KV-cache group whose block costs both pages."
    ),
    # -- speculative decoding ----------------------------------------------------------------
    "speculative.draft_layers": (
        "Speculative decoding ({method}, {k} tokens per step): the draft's {draft_layers} KV "
        "layer(s) ({draft_bytes:,} B per token) join the target's KV-cache groups, as vLLM puts "
        "them in the same spec dict."
    ),
    "speculative.ngram": (
        "Speculative decoding with ngram prompt lookup ({k} tokens per step): no draft model, "
        "no extra KV layers."
    ),
    "speculative.lookahead": (
        "While a request decodes, vLLM reserves KV slots for {reserved} tokens past its own "
        "({k} draft tokens being verified + {lookahead} lookahead), capped at max_model_len; "
        "the start-up figures (blocks, logged concurrency) leave them out."
    ),
    "speculative.extra_retained": (
        "Multi-module MTP: sliding-window layers keep {extra} more tokens "
        "(num_prefill_lookahead_tokens − 1) for re-prefill."
    ),
    "speculative.draft_weights_estimated": (
        "Draft weights counted from its config: {weights:,} B; the decode bound reads them once "
        "per draft step."
    ),
    "speculative.draft_weights_unknown": (
        "Draft weights unknown: the decode bound's draft steps count the draft's KV reads only."
    ),
    "speculative.bound": (
        "Speculative decode bound: a target step reads the weights and KV once for {k} + 1 "
        "positions, after {k} draft steps; at acceptance rate {rate:g}, each request gains "
        "{tokens:.3f} tokens per step (1 + a + … + a^{k})."
    ),
    # -- block size --------------------------------------------------------------------------
    "block.vllm_sparse_mla": (
        "vLLM's sparse MLA backend (FlashMLA-sparse on Hopper) takes blocks of 64 tokens only "
        "(using {block})."
    ),
    "block.ignored_no_paging": (
        "transformers has no paged cache: block_size is ignored (1 token)."
    ),
    "block.vllm_mla_forced": (
        "vLLM's MLA backends force the block size on CUDA: FlashMLA (Hopper) a multiple of 64, "
        "CUTLASS MLA (Blackwell) 128; block size changes rounding only, not bytes per token "
        "(using {block})."
    ),
    "block.vllm_hybrid_raised": (
        "vLLM raises the attention block size to {block} tokens (from {requested}) after "
        "loading, so that one attention page covers a state layer's page; state pages are "
        "padded to exactly that page. This overrides --block-size."
    ),
    # -- state layers --------------------------------------------------------------------------
    "state.vllm_mode": (
        "State (Mamba / linear-attention) layers: vLLM {version} keeps each request's state "
        "in {held} block(s) per state group (mamba_cache_mode {mode}); their size does not "
        "grow with the context."
    ),
    "state.vllm_mode_all": (
        "State (Mamba) layers: with prefix caching vLLM {version} keeps a state block for "
        "every {block} tokens of each request in each state group, and one per speculative "
        "token (mamba_cache_mode all), so their blocks grow with the context."
    ),
    "state.sglang_pool": (
        "State (Mamba / linear-attention) layers: SGLang keeps them in a state pool beside the "
        "token pool (--mamba-full-memory-ratio or --max-mamba-cache-size slots); each running "
        "request holds {held} state slot(s)."
    ),
    "state.constant": (
        "State (Mamba / linear-attention) layers keep a constant per-request state "
        "({state_bytes:,} B per request on each rank), whatever the context length."
    ),
    # -- windows -----------------------------------------------------------------------------
    "window.vllm_admission": (
        "vLLM budgets each sliding-window request cdiv(min(W − 1 + {in_flight:,}, ctx), "
        "block_size) + 1 blocks ({in_flight:,} = tokens in flight: max_num_batched_tokens "
        "{mnbt:,} × {batches}), so at short contexts SWA can admit fewer requests than full "
        "attention; hybrid groups are padded to a common size."
    ),
    "window.trtllm_full_length": (
        "TensorRT-LLM sizes every layer for the full sequence unless "
        "KvCacheConfig.max_attention_window is set (set max_attention_window to model the "
        "windows)."
    ),
    "window.vllm_hybrid_disabled": (
        "hybrid KV cache manager disabled: vLLM gives every sliding layer a full-length cache."
    ),
    "window.full_length_arch": (
        "{engine} gives sliding-window layers a full-length cache for this architecture (its SWA "
        "pools cover only Llama-4, gpt-oss and a few others)."
    ),
    "window.sglang_swa_pool": (
        "SGLang hybrid SWA pools: the SWA pool holds swa_full_tokens_ratio {ratio} × the full "
        "pool's tokens."
    ),
    "window.trtllm_cyclic": (
        "TensorRT-LLM keeps a cyclic buffer of the last W tokens in sliding layers; its "
        "per-window memory split is version-dependent (approximated per layer)."
    ),
    "window.transformers": (
        "transformers keeps the last sliding_window − 1 tokens in sliding layers."
    ),
    "window.vllm_chunked_hybrid": (
        "Chunked local attention (Llama-4): vLLM releases whose "
        "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 0 turn the hybrid KV "
        "cache manager off for it (every layer full length); model those with "
        "hybrid_kv_cache_manager=false."
    ),
    "window.vllm_disable_hybrid_noop": (
        "hybrid_kv_cache_manager=false changes nothing for this model: all its layers share one "
        "window spec, and vLLM rewrites windows as full attention only when full-attention "
        "layers are present too (unify_hybrid_kv_cache_specs)."
    ),
    # -- context -----------------------------------------------------------------------------
    "context.beyond_max_position": (
        "context_tokens {ctx:,} exceeds the model's maximum length {max_len:,}; engines refuse a "
        "max_model_len beyond it unless RoPE scaling allows it."
    ),
    # -- prefix caching ----------------------------------------------------------------------
    "prefix.none": (
        "transformers has no cross-request prefix cache: shared prefixes are stored per request."
    ),
    "prefix.off": "Prefix caching is off: shared prefixes are stored once per request.",
    "prefix.blocks": (
        "{engine} caches prefixes in whole blocks: a shared prefix is stored once, rounded down "
        "to a multiple of block_size {block}; full-attention layers only."
    ),
    "prefix.tokens": "{engine}'s radix cache stores a shared prefix once, token by token.",
    # -- parallelism -------------------------------------------------------------------------
    "parallel.replicated_heads": (
        "tensor_parallel_size {tp} > KV heads {kv_heads}: each KV head is held by "
        "{replication} ranks, so physical bytes exceed logical bytes."
    ),
    "parallel.mla_replicated": (
        "MLA: the MLA latent is replicated on all {tp} ranks (not sharded by TP)."
    ),
    "parallel.trtllm_estimator": (
        "TensorRT-LLM's estimator divides head_dim × Hkv by tp ({estimate:,} B/token per rank) "
        "while its allocator keeps ceil(Hkv/tp) heads; kvplan follows the allocator."
    ),
    # -- budget and capacity -----------------------------------------------------------------
    "budget.reserve_default": (
        "reserve_bytes defaulted to {reserve_gib} (activation peak, NCCL/cuBLAS, CUDA graphs); "
        "the engine measures these at start-up — take them from its log (kvplan reconcile) for "
        "an exact budget."
    ),
    # No longer raised (a budget above the GPU's memory is now a kv_budget_bytes field error);
    # kept because codes are never dropped.
    "budget.exceeds_gpu": (
        "The KV budget given, {budget}, is more than the {gpu}'s whole memory ({memory}): no "
        "engine can allocate it there; the capacity below is what that budget would hold."
    ),
    "budget.explicit_with_gpu": (
        "The KV budget is given ({budget}), so the engine allocates it as is after loading the "
        "weights, as vLLM does with --kv-cache-memory-bytes (from 0.10.2: no memory profile, "
        "gpu_memory_utilization ignored): weights {weights} + KV {budget} leave {left} of the "
        "{gpu}'s {memory} for activations, CUDA graphs and the CUDA context, which are not "
        "checked here."
    ),
    "budget.mxfp4_loaded": (
        "vLLM holds these MXFP4 experts padded for its kernels: {weights} of weights per GPU, "
        "more than the checkpoint's files ({how})."
    ),
    "budget.explicit_weights_unknown": (
        "The KV budget is given but the weight size is not known, so whether the weights and "
        "the KV cache together fit the {gpu} is not checked: set weights_bytes."
    ),
    "capacity.running_cap": (
        "Memory holds {fit:,} requests of {ctx:,} tokens, but {engine} runs at most {cap:,} at "
        "once ({flag}{default_suffix}); raise it to use the memory."
    ),
    "capacity.null_block": (
        'vLLM\'s log says "Maximum concurrency for {ctx:,} tokens per request: {reported:.2f}x" '
        "because it divides all {num_blocks:,} blocks by the {need:,} one request needs and "
        "ignores the reserved null block (block 0); with that block kept back, {fit:,} "
        "request(s) of {ctx:,} tokens can hold all their blocks at once."
    ),
    "capacity.prefix_shared": (
        "Requests of {ctx:,} tokens sharing a {shared:,}-token prefix hold its blocks once: "
        "{fit:,} fit at once instead of {alone:,}."
    ),
    "capacity.no_memory": (
        "No memory is left for the KV cache after weights and reserves: use more GPUs "
        "(tensor_parallel_size), a larger GPU, or quantized weights."
    ),
    "capacity.budget_zero": "The KV budget is 0 bytes, so no request fits.",
    "capacity.longest_beyond_max_position": (
        "Memory would admit one request of {longest:,} tokens, more than the model's maximum "
        "length {max_len:,}."
    ),
    "capacity.padding_layers": (
        "vLLM adds {padding} padding layers to equalise KV-cache groups; they cost memory but "
        "hold nothing."
    ),
    # -- bounds ------------------------------------------------------------------------------
    **BOUNDS_TEMPLATES,
    # -- reconcile (a log read back against the engine's rules) --------------------------------
    "reconcile.model_from_log": "Model {model} taken from the log's arguments.",
    "reconcile.plan_request_no_draft": (
        "The plan request has no field for the {draft} draft layers: its figures leave them out."
    ),
    **VERSION_TEMPLATES,  # how a log's release was found (notes_versions)
    "reconcile.other_engine_lines": ("{lines} recognised line(s) of another engine were left out."),
    "reconcile.lines_capped": (
        "{lines} repeated line(s) beyond the first {cap} of each kind were not checked (several "
        "restarts or ranks in one log?)."
    ),
    "reconcile.lines_truncated": "{lines} over-long line(s) were cut before matching.",
    "reconcile.sglang.free_after_pool": (
        "SGLang left {avail_gib} GiB free after the KV pool for activations and CUDA graphs."
    ),
    "reconcile.trtllm.tokens_not_block_multiple": (
        "{tokens:,} tokens is not a multiple of tokens_per_block {block}: check block_size."
    ),
    "reconcile.vllm.workers_differ": (
        "{workers} workers printed their available KV memory ({values} GiB); vLLM gives every "
        "worker the smallest one's block count, so {used} GiB is used."
    ),
    "reconcile.vllm.weights_gb_is_gib": (
        "vLLM's 'took X GB' weights line divides by 2^30: it is GiB."
    ),
    "reconcile.vllm.cuda_graphs_headroom": (
        "CUDA graphs took {graphs_gib} GiB after the KV cache was allocated: they live in the "
        "1 − gpu_memory_utilization headroom, not in the KV budget."
    ),
    "reconcile.vllm.reserve_negative": (
        "GPU memory × gpu_memory_utilization is smaller than weights + available KV: the GPU or "
        "utilization assumed here is not the one that wrote the log."
    ),
    "reconcile.vllm.mla_block_size": (
        "vLLM's MLA backends force the block size on CUDA (FlashMLA 64, CUTLASS MLA 128); set "
        "block_size if the log's figures were computed with it."
    ),
    "reconcile.vllm.hybrid_tokens_divided": (
        "'GPU KV cache size' divides num_blocks by the {groups} KV-cache groups of this hybrid "
        "model: it is not the tokens one request can hold."
    ),
    # -- recommend ---------------------------------------------------------------------------
    "recommend.kv_dtype_chosen": (
        "{dtype} KV cache chosen: the model's own dtype cannot hold the workload on these GPUs."
    ),
    "recommend.replace_model": "Replace MODEL with the checkpoint's name or path.",
    "recommend.max_num_seqs": (
        "max_num_seqs {batch} per instance keeps the batch within what the KV pool holds "
        "{quantile:.0%} of the time ({tail}; expected {expected:.1f}, {method} method)."
    ),
    "recommend.tpot_floor": (
        "The TPOT check uses the decode step's memory-bandwidth floor (KV + weights read once "
        "per step): a lower bound, real steps are slower."
    ),
    "engine.trtllm.replicas": (
        "Run {instances} trtllm-serve instances of TP {tp} behind a load balancer."
    ),
}


@dataclass(frozen=True, slots=True)
class Note:
    code: str
    params: Mapping[str, Param] = field(default_factory=dict)

    @property
    def template(self) -> str:
        return TEMPLATES[self.code]

    @property
    def text(self) -> str:
        return self.template.format(**self.params)


def note(code: str, **params: Param) -> Note:
    if code not in TEMPLATES:
        raise KeyError(f"note code {code!r} has no template")
    return Note(code, params)


class Notes:
    """Notes in the order they were raised, each (code, params) once."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[Note] = ()) -> None:
        self._items: list[Note] = []
        self.extend(items)

    def add(self, code: str, **params: Param) -> None:
        self.append(note(code, **params))

    def append(self, item: Note) -> None:
        if item not in self._items:
            self._items.append(item)

    def extend(self, items: Iterable[Note]) -> None:
        for item in items:
            self.append(item)

    def __iter__(self) -> Iterator[Note]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def texts(self) -> list[str]:
        return [n.text for n in self._items]

    def details(self) -> list[dict[str, Any]]:
        return [{"code": n.code, "params": dict(n.params), "text": n.text} for n in self._items]


__all__ = ["TEMPLATES", "Note", "Notes", "Param", "note"]
