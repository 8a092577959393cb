"""The notes on the dtypes kv_cache_dtype auto resolves to: the model's, or the one the
checkpoint declares for its KV cache. Part of `planner.core.notes.TEMPLATES`."""

from __future__ import annotations

DTYPE_TEMPLATES: dict[str, str] = {
    "dtype.auto_assumed_bf16": "The config gives no torch_dtype; kv_cache_dtype auto assumed bf16.",
    "dtype.fp32_served_16bit": (
        "{engine} serves float32 checkpoints in {dtype}, so kv_cache_dtype auto resolves to "
        "{dtype} here."
    ),
    # vLLM resolve_kv_cache_dtype_string / the Attention layer's kv_cache_scheme rule, SGLang
    # configure_kv_cache_dtype (planner.core.engines.<engine>.kv_checkpoint).
    "dtype.kv_from_checkpoint": (
        "{engine} uses the checkpoint's KV cache dtype {dtype} ({declared}) for kv_cache_dtype "
        "auto."
    ),
    # vLLM 0.15–0.21: a compressed-tensors kv_cache_scheme sets the cache to fp8 whatever was asked.
    "dtype.kv_checkpoint_overrides": (
        "{engine} runs the checkpoint's KV cache dtype {dtype} ({declared}) whatever "
        "kv_cache_dtype asks ({asked})."
    ),
}

__all__ = ["DTYPE_TEMPLATES"]
