"""Error templates for the model config, its quantization and its speculative draft.

Part of `planner.core.errors.ERROR_TEMPLATES` (code → English template). Codes are a contract:
add new ones, never rename one."""

from __future__ import annotations

MODEL_ERRORS: dict[str, str] = {
    "model.checkpoint_kv_unmodelled": (
        "{engine} runs the KV cache this checkpoint declares ({declared}) for kv_cache_dtype "
        "{asked}, which kvplan does not size"
    ),
    "model.attn_layer_indices_unknown_mixer": (
        "attn_layer_indices given, but kvplan does not know {model_type!r}'s mixer"
    ),
    "model.attn_layer_offset_range": "must be below attn_layer_period ({period}), got {offset}",
    "model.value_out_of_range_from_1": "must be between 1 and {hi}, got {value}",
    "model.value_out_of_range": "must be between {lo} and {hi}, got {value}",
    "model.chunked_needs_chunk_size": "chunked_attention layers need attention_chunk_size",
    "model.compressed_tensors_without_groups": (
        "compressed-tensors config without config_groups cannot be sized"
    ),
    "model.sparse_mla_needs_index_head_dim": (
        "DeepSeek sparse attention needs index_head_dim (its indexer's key width) to size the "
        "indexer cache"
    ),
    "model.hidden_size_not_divisible": (
        "hidden_size {hidden} is not divisible by num_attention_heads {num_heads}; set head_dim "
        "explicitly"
    ),
    "model.kv_shared_layers_range": (
        "must be an integer from 0 to {most} (fewer than num_hidden_layers), got {shared!r}"
    ),
    "model.not_integer_typed": "must be an integer, got {type} {value!r}",
    "model.not_integer": "must be an integer, got {value!r}",
    "model.not_integer_or_list": "must be an integer or a list of them, got {raw!r}",
    "model.kda_layers_cover": "kda_layers and full_attn_layers must name every layer exactly once",
    "model.kv_sharing_unknown": (
        "kvplan knows KV sharing only as Gemma-3n and Gemma-4 implement it ({types}); model type "
        "{model_type!r} sets num_kv_shared_layers {shared}"
    ),
    "model.layer_type_unsupported": (
        "layer type {kind!r} is not supported; kvplan sizes full_attention, sliding_attention and "
        "chunked_attention layers"
    ),
    "model.layer_type_unmodelled": (
        "layer {i} has type {word!r}, which kvplan does not model for {arch}; it sizes attention "
        "(full, sliding, chunked, MLA), Mamba/Mamba2, gated delta net, Kimi delta attention and "
        "short-convolution layers"
    ),
    "model.layer_type_chunked_without_size": (
        "layer_types[{i}] is chunked_attention but no attention_chunk_size"
    ),
    "model.layer_type_sliding_without_window": (
        "layer_types[{i}] is sliding_attention but no sliding_window is set"
    ),
    "model.layer_numbers_invalid": (
        "must be a list of 1-based layer numbers from 1 to {n} (as published), got {val!r}"
    ),
    "model.layer_indices_invalid": "must be a list of layer indices below {n}",
    "model.layer_strings_invalid": "must be a list of {n} strings (one per layer)",
    "model.layer_strings_invalid_2": "must be a list of {num_layers} strings (one per layer)",
    "model.encoder_decoder": (
        "model type {model_type!r} is an encoder-decoder model; kvplan does not size "
        "cross-attention or encoder caches"
    ),
    "model.cache_unmodelled": (
        "model type {model_type!r} keeps {cache}, which kvplan does not size; it refuses rather "
        "than size them as plain attention"
    ),
    "model.modelopt_algo_unsized": (
        "ModelOpt quant_algo {algo!r} is not sized (NVFP4 and FP8 are); set weights_bytes to the "
        "checkpoint size"
    ),
    "model.hf_quant_config_producer": (
        "hf_quant_config.json from producer {producer!r} is not read (only ModelOpt's is)"
    ),
    "model.hf_quant_config_exclude": "must be a list of module names",
    "model.hf_quant_config_group": "must be a positive integer",
    "model.heads_not_multiple_of_kv_heads": (
        "num_attention_heads {num_heads} is not a multiple of num_key_value_heads {kv_heads}; GQA "
        "needs whole query groups"
    ),
    "model.not_in_0_64": "must be a number in (0, 64], got {value!r}",
    "model.not_object": "must be an object",
    "model.quantization_unsized": (
        "quantization {method!r} is not sized (fp8, fbgemm_fp8, awq, gptq, mxfp4, modelopt, "
        "compressed-tensors are); set weights_bytes to the checkpoint size"
    ),
    "model.required_for_lfm2": "is required for LFM2's conv layers",
    "model.required_for_kv_cache": (
        "is required to size the KV cache (a Hugging Face config.json field)"
    ),
    "model.required_for_state": "is required to size this model's state layers",
    "model.head_dim_needed": (
        "set head_dim, or hidden_size so head_dim = hidden_size // num_attention_heads"
    ),
    "model.sliding_needs_window": "sliding_attention layers need sliding_window",
    "model.sliding_window_mla_unmodelled": (
        "sliding-window MLA layers (vLLM SlidingWindowMLASpec) are not sized by kvplan; it refuses "
        "rather than size every MLA layer for the whole sequence"
    ),
    "model.state_layers_unplaced": (
        "{model_type!r} has state (Mamba / linear-attention) layers, but the config does not say "
        "which layers they are in a form kvplan reads (layer_types, hybrid_override_pattern, "
        "layers_block_type, attn_layer_period/offset)"
    ),
    "model.attention_sinks_unmodelled": (
        "{sinks} static attention-sink tokens per layer (vLLM SinkFullAttentionSpec) are a cache "
        "kvplan does not size; it refuses rather than size plain attention"
    ),
    "model.not_string": "must be a string",
    "model.pattern_length": "must be a string of {n} characters (M, *, -, E; one per layer)",
    "model.not_string_got": "must be a string, got {word!r}",
    "model.dtype_not_string": "must be a string such as 'bfloat16'",
    "model.unknown_torch_dtype": "unknown dtype {raw!r}; expected bfloat16, float16 or float32",
    "model.unknown_dtype": "unknown dtype {raw!r}; expected float32, bfloat16 or float16",
    "speculative.draft_tp": (
        "kvplan models a draft sharded like the target (tensor_parallel_size {tp}); got "
        "{draft_tp}. Omit it or set it to {tp}"
    ),
    "speculative.mtp_nextn_invalid": (
        "method mtp needs the model's num_nextn_predict_layers (1 to 64) in its config; this "
        "config has {n!r}"
    ),
    "speculative.mtp_field_invalid": (
        "method mtp reads the model's {field} (1 to 64) from its config; this config has {raw!r}"
    ),
    "speculative.mtp_nextn_missing": (
        "method mtp reads num_nextn_predict_layers from the model's config.json; this model has "
        "none here: give the target's config as model"
    ),
    "speculative.draft_required": (
        "method {method} needs the draft: a catalog id or its config.json object (EAGLE heads for "
        "Llama-3.1-8B are a 1-layer Llama config)"
    ),
    "speculative.tokens_required": (
        "method {method} needs num_speculative_tokens (draft tokens per step, e.g. 3)"
    ),
    "speculative.ngram_has_no_draft": "method ngram has no draft model; omit model",
    "speculative.mtp_modules_unknown": (
        "this model's config does not say how many MTP modules it has, so vLLM takes no default: "
        "set num_speculative_tokens (e.g. 1)"
    ),
    "speculative.mtp_no_full_attention": (
        "this model has no full-attention layer for its MTP module to copy"
    ),
    "speculative.mtp_unknown_model_type": (
        "vLLM has no MTP draft for model type {model_type!r} (it builds them for DeepSeek-V3/V3.2, "
        "GLM-4.5, ERNIE-4.5, MiMo, Qwen3-Next and Qwen3.5 among the models kvplan sizes)"
    ),
    "speculative.mtp_tokens_multiple": (
        "vLLM needs num_speculative_tokens ({k}) at most the model's MTP modules ({n_predict}) or "
        "a multiple of it; try {suggested}"
    ),
    "model.gemma4_per_layer_embeddings": (
        "Gemma-4 per-layer input embeddings (the E2B/E4B models) are not counted by kvplan; "
        "give the checkpoint's weights_bytes instead"
    ),
}
