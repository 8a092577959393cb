"""Why a reconciled figure differs or cannot be recomputed (`Check.reason`).

Part of `planner.core.errors.ERROR_TEMPLATES` (code → English template). Codes are a contract:
add new ones, never rename one."""

from __future__ import annotations

RECONCILE_REASONS: dict[str, str] = {
    "reason.trtllm_tokens_per_block": (
        "matches tokens_per_block {t} (set block_size {t}; this log does not print it)"
    ),
    "reason.matches_other_kv_dtype": "matches a {dtype} KV cache: set kv_cache_dtype",
    "reason.trtllm_old_log_no_free_memory": (
        "this (old) log prints no free-memory line to recompute it from; the allocation rounds it "
        "up to {blocks:,} blocks of {block} = {tokens:,} tokens"
    ),
    "reason.trtllm_memory_fraction": "matches free_gpu_memory_fraction {fr:g}",
    "reason.pp_whole_model_charged": (
        "the log charges all {layers} layers of every pipeline stage against one stage's memory (a "
        "version-dependent start-up check, vllm#34076); per stage the figure is as predicted"
    ),
    "reason.matches_fp8_kv": "matches an fp8 KV cache: set kv_cache_dtype to fp8",
    "reason.matches_model_dtype_kv": "matches a {dtype} KV cache: set kv_cache_dtype to auto",
    "reason.matches_hybrid_manager_off": (
        "matches with the hybrid KV cache manager disabled (every layer full length)"
    ),
    "reason.matches_tp": "matches tensor_parallel_size {t} (KV heads per rank differ)",
    "reason.matches_mla_block_size": (
        "matches block_size {b} (vLLM's MLA backends force it on CUDA)"
    ),
    "reason.padding_old_group_rule": (
        "version-dependent: before vLLM PR #29303 the group size was always the smallest layer "
        "bucket"
    ),
    "reason.v0_no_kv_memory": (
        "the log prints no KV memory or block count to recompute it from; implied: {logged:,} "
        "tokens = {implied:,} blocks × {cost:,} B = {memory} of KV per worker (vLLM v0 takes the "
        "minimum over workers)"
    ),
    "reason.pp_check_charges_all_layers": (
        "the start-up check charges all {layers} layers (every pipeline stage) against one stage's "
        "memory: {needed} (version-dependent, vllm#34076)"
    ),
    "reason.pp_estimate_all_layers": (
        "estimated with all layers of every pipeline stage, as this version's check charges them "
        "(vllm#34076)"
    ),
    "reason.padding_per_stage": (
        "version-dependent: this warning groups pipeline stage {i}'s layers on their own (a "
        "start-up check that groups each worker's layers); the cache itself uses the whole model's "
        "groups"
    ),
    "reason.likely_min_over_workers": (
        "likely: vLLM sets num_blocks to the minimum over its {workers} workers, and the log shows "
        "{seen} worker's available memory; another worker had less (a KV connector or another "
        "process on that GPU would do it)"
    ),
    "reason.no_available_kv_line": (
        "the log has no 'Available KV cache memory' line to recompute it from"
    ),
    "reason.tokens_need_max_model_len": (
        "'GPU KV cache size' is max concurrency × max_model_len; give max_model_len"
    ),
    "reason.blocks_only": (
        "this log prints no available KV memory (only the block count); implied KV memory: "
        "{logged:,} blocks × {cost:,} B = {memory} per worker"
    ),
    "reason.nothing_to_divide": (
        "the log has neither the available KV memory nor a block or token count to divide"
    ),
    "reason.log_model_not_in_catalog": (
        "the log names model {named!r}, which is not in the catalog: pass its config.json as model"
    ),
    "reason.no_model": (
        "no model given and the log names none: pass model (a catalog id or its config.json) to "
        "recompute this figure"
    ),
    "reason.trtllm_no_memory_line": (
        "the log has no 'Memory usage when calculating max tokens … available' line to recompute "
        "it from"
    ),
    "reason.sglang_needs_load_begin": (
        "'Load weight begin … avail mem' (free memory before weights)"
    ),
    "reason.sglang_needs_load_end": "'Load weight end … avail mem' (free memory after weights)",
    "reason.sglang_needs_fraction": "mem_fraction_static (auto-chosen by SGLang when not passed)",
    "reason.sglang_budget_needs_1": "SGLang's budget needs {a}, which this log lacks",
    "reason.sglang_budget_needs_2": "SGLang's budget needs {a} and {b}, which this log lacks",
    "reason.sglang_budget_needs_3": (
        "SGLang's budget needs {a} and {b} and {c}, which this log lacks"
    ),
    "reason.draft_layer_in_cache": "the KV cache includes {k} speculative draft layer (EAGLE/MTP)",
    "reason.draft_layers_in_cache": (
        "the KV cache includes {k} speculative draft layers (EAGLE/MTP)"
    ),
    "reason.draft_layer_old_grouping": (
        "the KV cache includes {k} speculative draft layer (EAGLE/MTP) and the grouping rule "
        "before vLLM PR #29303"
    ),
    "reason.draft_layers_old_grouping": (
        "the KV cache includes {k} speculative draft layers (EAGLE/MTP) and the grouping rule "
        "before vLLM PR #29303"
    ),
    "reason.matches_draft_layer": (
        "matches with {k} speculative draft layer (EAGLE/MTP) in the KV cache: set "
        "speculative_config (or draft_layers {k})"
    ),
    "reason.matches_draft_layers": (
        "matches with {k} speculative draft layers (EAGLE/MTP) in the KV cache: set "
        "speculative_config (or draft_layers {k})"
    ),
    "derivation.blocks_from_concurrency": (
        "{tokens:,} tokens × {need:,} blocks per request / max_model_len {length:,}"
    ),
    "derivation.blocks_per_group": "{tokens:,} tokens / {bs} × {groups} group",
    "derivation.blocks_per_groups": "{tokens:,} tokens / {bs} × {groups} groups",
    "derivation.kv_from_tokens": (
        "KV budget from the logged 'GPU KV cache size': {how} = {blocks:,} blocks × {cost:,} B = "
        "{budget} (the log shows no available memory)"
    ),
    "derivation.weights_per_rank": "weights per rank {gib} GiB (line {line})",
    "derivation.reserve_from_profile": "reserve = activation peak + non-torch = {reserve}",
    "derivation.reserve_from_fraction": (
        "reserve = {memory} × {fraction:g} (vLLM {version}: {requested}) − weights − available KV "
        "= {reserve}"
    ),
    "derivation.reserve_needs_gpu": (
        "give the GPU (its catalog id, or its memory) and the memory fraction it ran with to learn "
        "the reserve from the available memory"
    ),
    "derivation.trtllm_kv_budget": "KV budget = available {available} GiB × fraction {fraction:g}",
    "derivation.trtllm_weights_activations": (
        "device total {total} GiB − available {available} GiB = weights + activations "
        "(TensorRT-LLM applies the fraction to free memory after both)"
    ),
    "derivation.sglang_kv_budget": "KV budget {how}",
    "derivation.sglang_no_budget": "no budget lines",
    "derivation.sglang_weights": "weights per rank {weights} ('mem usage')",
    "derivation.sglang_no_weights": "no weights line",
    "recommend.binding": "with TP {tp} and {dtype} KV: {reason}",
    "recommend.no_kv_memory": (
        "weights and reserves leave no KV memory on {tp} GPU(s) ({derivation})"
    ),
    "recommend.max_model_len": (
        "one request of max_model_len {max_len:,} does not fit; the longest that does is "
        "{longest:,} tokens"
    ),
    "recommend.no_request_fits": "not even one request of the mix fits reliably",
    "recommend.instances_short": (
        "{tail} requests fit per instance {quantile:.0%} of the time; {available} instance(s) of "
        "TP {tp} hold {held}, short of {concurrency}"
    ),
    "recommend.batch_does_not_fit": (
        "a batch of {batch} in the mix's proportions does not fit one instance"
    ),
    "recommend.tpot_floor": (
        "the decode step's bandwidth floor at a batch of {batch} is {floor_ms:.2f} ms, above the "
        "{target_ms:.2f} ms TPOT target"
    ),
    "recommend.tpot_expected": (
        "the expected TPOT at a batch of {batch} is {tpot_ms:.2f} ms (floor {floor_ms:.2f} ms), "
        "above the {target_ms:.2f} ms TPOT target"
    ),
    "recommend.throughput_floor": (
        "{concurrency} requests at the bandwidth floor at a batch of {batch} ({floor_ms:.2f} ms a "
        "step) make {rate:,.0f} tokens/s, below the {want:,.0f} tokens/s throughput target"
    ),
    "recommend.throughput_expected": (
        "{concurrency} requests at the expected TPOT at a batch of {batch} ({tpot_ms:.2f} ms) make "
        "{rate:,.0f} tokens/s, below the {want:,.0f} tokens/s throughput target"
    ),
}
