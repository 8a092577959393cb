"""Error templates for the request's inputs, sizes and logs to reconcile.

Part of `planner.core.errors.ERROR_TEMPLATES` (code → English template). Codes are a contract:
add new ones, never rename one."""

from __future__ import annotations

INPUT_ERRORS: dict[str, str] = {
    "input.async_scheduling_not_vllm": (
        "{label} has no async_scheduling setting (a vLLM flag); omit the field"
    ),
    "input.memory_fraction_below_1": (
        "{label}'s {flag} must be below 1.0 (got {util:g}); its default is {default:g}"
    ),
    "input.value_out_of_range": "must be between {lo} and {hi}, got {value}",
    "input.unknown_calibration": (
        "no calibration {calibration_id!r}; list them with GET /api/v1/calibrations"
    ),
    "input.budget_needs_weights": (
        "cannot derive a KV budget from the GPU without the weight size; set weights_bytes (0 for "
        "KV only) or kv_budget_bytes"
    ),
    "input.bandwidth_unreadable": "cannot read {text!r} as a bandwidth; write e.g. 1.5TB/s",
    "input.size_unreadable": "cannot read {text!r} as a size; write e.g. 48GiB or 80GB",
    "input.context_needed": (
        "the config has no max_position_embeddings; set context_tokens (e.g. 8192) or requests"
    ),
    "input.max_attention_window_not_trtllm": (
        "{label} does not take max_attention_window (a TensorRT-LLM setting); it reads each "
        "layer's window from the model config (omit the field)"
    ),
    "input.draft_reason": "the draft: {reason}",
    "input.not_integer": "must be an integer, got {value!r}",
    "input.not_integer_or_flags": "must be an integer or a list of {num_layers} flags",
    "input.kv_dtype_not_recommendable": (
        "{label} has no KV cache dtype {dtype!r} to recommend; use auto or one of: {names}"
    ),
    "input.speculative_not_vllm": (
        "kvplan models speculative-decoding draft layers as vLLM arranges them; it does not model "
        "{label}'s draft cache. Plan with engine vllm, or omit speculative_config"
    ),
    "input.not_layer_indices": "must be a list of layer indices",
    "input.config_missing_keys": "model config has no {keys}",
    "input.parameters_not_positive": "needs a positive parameter count and TP/PP ≥ 1",
    "input.required_for_parameters": (
        "is required to count the model's parameters (config.json field)"
    ),
    "input.required_for_moe": "is required for a mixture-of-experts config",
    "input.required_for_experts": "is required to size the experts of a MoE layer",
    "input.context_above_model_maximum": (
        "{ctx:,} tokens is more than the model's maximum length {max_len:,}, and {label} refuses "
        "such a max_model_len unless {override} is set; plan at most {max_len:,} tokens, or set "
        "allow_long_max_model_len=true"
    ),
    "input.size_too_large": "{text!r} is too large",
    "input.unknown_dtype": "unknown dtype {name!r}; use one of: {names}",
    "reconcile.no_startup_line": (
        "no KV-cache start-up line was recognised in {lines:,} lines{seen}; paste the engine's "
        "start-up output, e.g. {examples}"
    ),
    "reconcile.log_empty": (
        "the log is empty; paste the engine's start-up lines (its KV-cache lines)"
    ),
    "reconcile.log_too_large": (
        "the log is larger than {mib} MiB; paste only the start-up lines (from engine start to "
        "'Maximum concurrency' / 'KV Cache is allocated')"
    ),
    "reconcile.too_many_lines": (
        "the log has {n_lines:,} lines; at most {most:,} are read — paste the start-up part only"
    ),
    "reconcile.other_engine_log": (
        "the log is a {detected_label} log ({lines} of its KV-cache lines recognised, none of "
        "{claimed_label}'s); set engine to {detected} or paste the log of the engine you meant"
    ),
    "reconcile.log_binary": (
        "this looks like binary data, not a text log (NUL or control bytes); paste the engine's "
        "text output"
    ),
    # A FieldError's detail: the field, then what is wrong with it.
    "field.detail": "{field}: {reason}",
    "request.prefix_above_context": "prefix_tokens must not exceed context_tokens",
    "request.config_too_many_keys": "model config has more than {most} keys",
    "request.draft_config_too_many_keys": "draft model config has more than {most} keys",
    "request.engine_choices": "use one of: {engines}",
    "request.mix_or_max_model_len": "give context_mix (length shares) or max_model_len",
    "request.mix_shares_sum": (
        "context_mix shares sum to {total:g}; they must sum to 1 (e.g. 0.7, 0.2, 0.1)"
    ),
    "request.max_model_len_below_mix": (
        "max_model_len {max_model_len} is shorter than the longest request in context_mix "
        "({longest}); raise it or drop that class"
    ),
    "request.speculative_or_draft_layers": "give speculative_config or draft_layers, not both",
    "request.sweep_too_many_points": (
        "grid of context_tokens × batch_sizes × tensor_parallel_sizes has {points} points; at most "
        "{most} are allowed, split the sweep"
    ),
    # One home for a given budget beside a GPU (planner.core.memory).
    "budget.above_gpu": (
        "{budget} is more than the {gpu} has ({memory}): the budget is per GPU and no engine can "
        "allocate it there; leave it out to derive it from the GPU"
    ),
    "prefix.shared_and_per_entry": "give it or the entries' prefix_tokens, not both",
    "prefix.longer_than_request": (
        "{prefix:,} tokens is longer than the shortest request ({shortest:,} tokens)"
    ),
}
