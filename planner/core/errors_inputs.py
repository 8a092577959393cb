"""Error templates for the request's inputs, sizes and logs to reconcile.

Part of `planner.core.errors.ERROR_TEMPLATES` (code → English template). Codes are a contract:
add new ones, never rename one."""

from __future__ import annotations

INPUT_ERRORS: dict[str, str] = {
    "input.async_scheduling_setting_vllm": (
        "{engine_label} has no async_scheduling setting (a vLLM flag); omit the field"
    ),
    "input.memory_fraction_below_1": (
        "{engine_label}'s {engine_memory_fraction_flag} must be below 1.0 (got {util:g}); its "
        "default is {engine_default_memory_utilizatio:g}"
    ),
    "input.value_out_of_range": "must be between {lo} and {hi}, got {value}",
    "input.calibration_list_them_get": (
        "no calibration {request_calibration_id!r}; list them with GET /api/v1/calibrations"
    ),
    "input.cannot_derive_kv_budget": (
        "cannot derive a KV budget from the GPU without the weight size; set weights_bytes (0 for "
        "KV only) or kv_budget_bytes"
    ),
    "input.cannot_read_bandwidth_write": "cannot read {text!r} as a bandwidth; write e.g. 1.5TB/s",
    "input.cannot_read_size_write": "cannot read {text!r} as a size; write e.g. 48GiB or 80GB",
    "input.config_max_position_embeddings": (
        "the config has no max_position_embeddings; set context_tokens (e.g. 8192) or requests"
    ),
    "input.does_take_max_attention": (
        "{engine_label} does not take max_attention_window (a TensorRT-LLM setting); it reads each "
        "layer's window from the model config (omit the field)"
    ),
    "input.draft_reason": "the draft: {reason}",
    "input.not_integer": "must be an integer, got {value!r}",
    "input.integer_list_flags": "must be an integer or a list of {num_layers} flags",
    "input.kv_cache_dtype_recommend": (
        "{engine_label} has no KV cache dtype {dtype!r} to recommend; use auto or one of: "
        "{join_sorted_table_or_none}"
    ),
    "input.kvplan_models_speculative_decoding": (
        "kvplan models speculative-decoding draft layers as vLLM arranges them; it does not model "
        "{engine_label}'s draft cache. Plan with engine vllm, or omit speculative_config"
    ),
    "input.list_layer_indices": "must be a list of layer indices",
    "input.config_missing_keys": "model config has no {keys}",
    "input.needs_positive_parameter_count": "needs a positive parameter count and TP/PP ≥ 1",
    "input.required_count_model_parameters": (
        "is required to count the model's parameters (config.json field)"
    ),
    "input.required_mixture_experts_config": "is required for a mixture-of-experts config",
    "input.required_size_experts_moe": "is required to size the experts of a MoE layer",
    "input.tokens_more_model_maximum": (
        "{ctx:,} tokens is more than the model's maximum length {max_len:,}, and {label} refuses "
        "such a max_model_len unless {override} is set; plan at most {max_len:,} tokens, or set "
        "allow_long_max_model_len=true"
    ),
    "input.size_too_large": "{text!r} is too large",
    "input.unknown_dtype_use": "unknown dtype {name!r}; use one of: {DTYPE_NAMES}",
    "reconcile.no_startup_line": (
        "no KV-cache start-up line was recognised in {log_lines_read:,} lines{seen}; paste the "
        "engine's start-up output, e.g. {examples}"
    ),
    "reconcile.log_empty": (
        "the log is empty; paste the engine's start-up lines (its KV-cache lines)"
    ),
    "reconcile.log_too_large": (
        "the log is larger than {max_log_bytes_1_20} MiB; paste only the start-up lines (from "
        "engine start to 'Maximum concurrency' / 'KV Cache is allocated')"
    ),
    "reconcile.too_many_lines": (
        "the log has {n_lines:,} lines; at most {MAX_LOG_LINES:,} are read — paste the start-up "
        "part only"
    ),
    "reconcile.other_engine_log": (
        "the log is a {engine_labels_detected} log ({counts_detected} of its KV-cache lines "
        "recognised, none of {engine_labels_claimed}'s); set engine to {detected} or paste the log "
        "of the engine you meant"
    ),
    "reconcile.log_binary": (
        "this looks like binary data, not a text log (NUL or control bytes); paste the engine's "
        "text output"
    ),
    # A FieldError's detail: the field, then what is wrong with it.
    "field.detail": "{field}: {reason}",
}
