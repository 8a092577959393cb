"""Error templates for what each engine (vLLM, SGLang, TensorRT-LLM, transformers) refuses.

Part of `planner.core.errors.ERROR_TEMPLATES` (code → English template). Codes are a contract:
add new ones, never rename one."""

from __future__ import annotations

ENGINE_ERRORS: dict[str, str] = {
    "engine.kv_dtype_unsupported": (
        "{label} {version} has no {dtype!r} KV cache; use one of: {names}"
    ),
    "engine.transformers_state_tp": (
        "kvplan has not checked how transformers' tp_plan shards state (Mamba / linear-attention) "
        "layers; use tensor_parallel_size 1"
    ),
    "engine.state_layers_unmodelled": (
        "kvplan does not model how {label} sizes the state (Mamba / linear-attention) layers of "
        "{arch} (its own state pool); use engine vllm or transformers"
    ),
    "engine.kv_sharing_unmodelled": (
        "kvplan does not model how {label} caches layers that share KV ({n_shared} of {layers} "
        "layers here); plan it for vllm or transformers, which give those layers no cache"
    ),
    "engine.logs_unread": "kvplan does not read {label} logs",
    "engine.no_launch_command": "{label} has no launch command to recommend",
    "engine.tp_divides_kv_heads": (
        "{label} needs num_key_value_heads ({hkv}) divisible by tensor_parallel_size ({tp}) when "
        "heads >= ranks; sizes that work: {ok}"
    ),
    "engine.tp_multiple_of_kv_heads": (
        "{label} replicates KV heads when tensor_parallel_size ({tp}) > num_key_value_heads "
        "({hkv}); it must then be a multiple of {hkv}; sizes that work: {ok}"
    ),
    "engine.tp_divides_heads": (
        "{label} requires num_attention_heads ({hq}) divisible by tensor_parallel_size ({tp}); "
        "sizes that work: {ok}"
    ),
    "engine.tp_divides_state": (
        "{label} shards the state layers' {what} ({value}) over tensor_parallel_size ({tp}), which "
        "must divide it; sizes that work: {ok}"
    ),
    "engine.too_many_stages": "{pp} stages for {layers} layers; use at most {layers}",
    "engine.release_unsupported": (
        "{label} {text!r} is not a supported release; kvplan follows {label} {releases} (e.g. "
        "{example!r})"
    ),
    "engine.transformers_tp_kv_heads": (
        "transformers' tp_plan shards KV heads: num_key_value_heads ({hkv}) must be divisible by "
        "tensor_parallel_size ({tp})"
    ),
    "engine.unknown": "unknown engine {name!r}; use one of: {engines}",
    "sglang.dp_attention_divides_tp": (
        "--dp-size {attn_dp} with --enable-dp-attention must divide --tp {tp}"
    ),
    "sglang.memory_fraction_range": (
        "mem_fraction_static must be in (0, 1) (got {mem_fraction_static:g})"
    ),
    "sglang.hybrid_pipeline_unmodelled": (
        "kvplan does not yet split a hybrid model with attention-free MLP layers ({arch}) across "
        "SGLang pipeline stages; use pipeline_parallel_size 1"
    ),
    "sglang.memory_not_positive": "needs a positive GPU memory and weights ≥ 0",
    "sglang.context_length_above_derived": (
        "User-specified context_length ({requested}) is greater than the derived context_length "
        "({derived}); SGLang refuses it unless {long_context_override} is set "
        "(allow_long_max_model_len=true)"
    ),
    "trtllm.memory_fraction_below_1": (
        "{label}'s free_gpu_memory_fraction must be below 1.0 (got {fraction:g}); its default is "
        "0.9"
    ),
    "trtllm.memory_fraction_range": (
        "free_gpu_memory_fraction must be in (0, 1) (got {f:g}); its default is 0.9"
    ),
    "trtllm.memory_not_positive": "needs a positive GPU memory, weights ≥ 0, activation ≥ 0",
    "vllm.negative": "must be ≥ 0",
    "vllm.memory_fraction_range": "must be in (0, 1] (got {util:g})",
    "vllm.below_1": "must be ≥ 1 (got {value})",
    "vllm.attention_free_unmodelled": (
        "attention-free models (every layer a state layer) are not modelled for vLLM: it sizes "
        "them without an attention page to align to"
    ),
    "vllm.state_with_sliding_unmodelled": (
        "kvplan does not model vLLM hybrids that mix state layers with sliding-window attention"
    ),
    "vllm.hybrid_pipeline_unmodelled": (
        "kvplan does not yet split a hybrid (state + attention) model across vLLM pipeline stages; "
        "use pipeline_parallel_size 1"
    ),
    "vllm.pipeline_v0": (
        "vLLM {version} runs pipeline parallelism on its V0 engine unless "
        "--distributed-executor-backend is given (V1 takes it by default from 0.9.1); kvplan "
        "models V1: use engine_version 0.9.1 or later, or pipeline_parallel_size=1"
    ),
    "vllm.pp_stage_groups_differ": (
        "vLLM before 0.11 groups each pipeline stage's layers on its own, and stage {stage}'s "
        "KV-cache groups ({groups}) do not pair with stage 0's ({first}): "
        "unify_kv_cache_configs fails its assertion and vLLM does not start; use another "
        "pipeline_parallel_size, or engine_version 0.11 or later"
    ),
    "vllm.state_layers_v0": (
        "vLLM {version} runs models with state (Mamba / linear-attention) layers on its V0 "
        "engine unless VLLM_USE_V1=1 (V1 takes them by default from 0.10.2); kvplan models V1: "
        "use engine_version 0.10.2 or later"
    ),
    "vllm.state_release_unmodelled": (
        "kvplan knows vLLM's sizing of state (Mamba / linear-attention) layers for 0.10.2–0.11 "
        "and 0.14–0.33, not for {version}: the block-size alignment and state blocks per request "
        "changed in between; use engine_version 0.14 or later, or 0.11"
    ),
    "vllm.async_mamba_prefix_caching": (
        "vLLM {version} refuses async scheduling with prefix caching for models with Mamba / "
        'linear-attention layers ("Currently, async scheduling is not compatible with prefix '
        'caching for Mamba models"; 0.15 and 0.17 take it); set async_scheduling=false or '
        "enable_prefix_caching=false"
    ),
    "vllm.mamba_spec_release": (
        "vLLM {version} runs speculative decoding on state (Mamba / linear-attention) layers "
        'only for Qwen3-Next ("Mamba with speculative decoding is not supported yet"); use '
        "engine_version 0.15 or later"
    ),
    "vllm.mtp_hybrid_release": (
        "kvplan has sized MTP drafts on gated-delta-net hybrids as vLLM 0.33 does (checked against "
        "its own code), not 0.11's; use engine_version 0.33"
    ),
    "vllm.pp_layer_partition": "must list {pp} stage sizes summing to {layers} layers (got {part})",
    "vllm.mxfp4_needs_moe": "MXFP4 expert weights need an MoE config (experts, top-k)",
    "vllm.qwen3_5_not_in_0_11": (
        "vLLM 0.11 has no Qwen3.5 model (its registry lists no Qwen3_5 architecture); use "
        "engine_version 0.33"
    ),
    "vllm.qwen3_5_text_mtp_release": (
        "vLLM {version} drafts MTP only for the multimodal Qwen3.5 checkpoints (model_type "
        "qwen3_5 / qwen3_5_moe): a text-only config's MTP is an unsupported speculative method "
        "there; use engine_version 0.28 or later"
    ),
    "vllm.async_scheduling_unknown": (
        "vLLM 0.9 has no async scheduling (--async-scheduling is new in 0.10); set "
        "async_scheduling=false"
    ),
    "vllm.architecture_not_in_release": (
        "vLLM {version} has no {arch} model (its registry lists it from {first}); use "
        "engine_version {first} or later"
    ),
    "vllm.async_scheduling_with_pp": (
        "vLLM {version}: Async scheduling is not supported with pipeline-parallel-size > 1 (from "
        "vLLM 0.15 it is); set async_scheduling=false or pipeline_parallel_size=1"
    ),
    "vllm.async_scheduling_ngram": (
        "vLLM {version}: Currently, async scheduling is only supported with EAGLE/MTP/Draft "
        "Model kind of speculative decoding, not n-gram (from vLLM 0.33 it is); set "
        "async_scheduling=false"
    ),
    "vllm.draft_pipeline": (
        "vLLM {version}: Pipeline parallelism is not supported for this model (the {method} "
        "draft's model class does not implement the `SupportsPP` interface; from vLLM 0.30 the "
        "draft runs with pipeline size 1); use pipeline_parallel_size 1 or engine_version 0.30 "
        "or later"
    ),
    "vllm.bf16_kv_on_hopper": (
        "vLLM {version_label}: no {kind} backend on Hopper lists a bfloat16 KV cache (bfloat16 "
        "joins their lists in 0.15); use kv_cache_dtype auto"
    ),
    "vllm.page_sizes_not_unified": (
        "vLLM cannot unify the page sizes of this hybrid model ({p} vs {page_max} bytes); try "
        "hybrid_kv_cache_manager=false"
    ),
    "vllm.kv_heads_below_tp": (
        "vLLM's {arch} divides num_key_value_heads ({kv_heads}) by tensor_parallel_size ({tp}) "
        "without replication, leaving 0 KV heads per rank; use at most {kv_heads}"
    ),
    "vllm.quantized_float32": (
        "vLLM does not run a {method} checkpoint in float32 (its quantization method supports "
        "16-bit activations only); use dtype auto or bfloat16"
    ),
    "vllm.float16_unstable": (
        "vLLM does not run {arch} in float16 (numerical instability); use dtype bfloat16 or auto"
    ),
    "vllm.kv_dtype_incompatible": (
        'vLLM {version_label}: kv_cache_dtype="{cache}" is incompatible with dtype="{model}". '
        "Please set `--kv-cache-dtype` to {allowed}."
    ),
    "vllm.mla_float32": (
        "no vLLM MLA attention backend on CUDA runs float32 (FlashMLA, FlashAttention-MLA, Triton "
        "MLA take float16 and bfloat16); use dtype auto or bfloat16"
    ),
    "vllm.mla_kv_dtype": (
        "no vLLM MLA attention backend on CUDA supports a {dtype} KV cache; use one of: {dtypes}"
    ),
    "vllm.mxfp4_bfloat16_only": (
        "vLLM's mxfp4 quantization (gpt-oss) supports bfloat16 only; use dtype auto or bfloat16"
    ),
    "vllm.release_outside_rules": (
        "vLLM {text} is outside the releases whose memory profiling is modelled "
        "({first}.0–{last}.x)"
    ),
    "vllm.quantization_capability": (
        "vLLM {version}: the quantization method {method} is not supported for the current GPU. "
        "Minimum capability: {need}. Current capability: {cap} ({gpu}); choose a GPU of compute "
        "capability {need_major}.{need_minor} or newer, or a checkpoint in another format"
    ),
    "vllm.kv_sharing_pipeline": (
        "vLLM runs {model_type} (layers sharing KV) without pipeline parallelism; use "
        "pipeline_parallel_size 1"
    ),
    "vllm.sparse_mla_block_size": (
        "vLLM's sparse MLA backend (DeepSeek-V3.2 indexer) needs block_size a multiple of "
        "{multiple}; got {requested}"
    ),
    "vllm.sparse_mla_kv_dtype": (
        "vLLM {version}: No valid sparse MLA backend for cuda (SM90) takes a {dtype} KV cache "
        "(DeepSeek-V3.2's indexer: FlashMLA-sparse lists auto, bfloat16 and fp8; "
        "FlashAttention-MLA-sparse, from 0.25, float16; FlashInfer-MLA-sparse, from 0.30, "
        "fp8_e4m3); use another kv_cache_dtype or a later engine_version"
    ),
    "vllm.sparse_mla_flashmla_dtype": (
        "vLLM {version}: No valid sparse MLA backend for cuda (SM90) runs this model dtype: "
        "FlashMLA-sparse, the only one before 0.25, takes bfloat16 models only; use dtype auto "
        "or bfloat16, or engine_version 0.25 or later"
    ),
    "vllm.sparse_mla_hopper_dtype": (
        "vLLM's sparse MLA backends (DeepSeek-V3.2 indexer) on Hopper run an {dtype} KV cache with "
        "a bfloat16 model only (FlashMLA-sparse, FlashInfer-MLA-sparse), and "
        "FlashAttention-MLA-sparse takes no fp8 cache; use dtype auto or bfloat16, or "
        "kv_cache_dtype auto"
    ),
    "vllm.dflash_release": (
        "vLLM {version} has no speculative method 'dflash' (SpeculativeConfig takes it from vLLM "
        "0.20); use eagle3, or plan for vLLM 0.20 or later"
    ),
    "vllm.version_unreadable": "{text!r} is not a vLLM version; give one such as '0.19.0'",
    "engine.sglang_flag_elsewhere": "{flag} is an SGLang setting; {label} has none (omit it)",
    "engine.context_length_elsewhere": (
        "context_length is SGLang's; {label} takes the length as context_tokens"
    ),
}
