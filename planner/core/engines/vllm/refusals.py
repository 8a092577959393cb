"""What vLLM refuses to start, with its own reason (read in vLLM's model files, attention
backends and VllmConfig at each release)."""

from __future__ import annotations

from planner.core.engines.versions import Version, since, version_text
from planner.core.engines.vllm.releases import (
    ARCHITECTURE_SINCE,
    MLA_BF16_KV_SINCE,
    MLA_DTYPE_CHECK_SINCE,
    PP_V1_DEFAULT_SINCE,
    SPARSE_FA_SINCE,
    SPARSE_PLAIN_FP8_E4M3_SINCE,
)
from planner.core.errors import FieldError
from planner.core.model import ModelShape
from planner.core.specs import SparseMLASpec
from planner.core.units import KVDtype

# Attention layers pick their backend by its declared dtypes (AttentionBackend
# validate_configuration via CudaPlatform.get_attn_backend_cls), read in the 0.12.0 wheel.
BACKEND_KV_DTYPE_CHECK_SINCE = (0, 12)
# VllmConfig._reject_mismatched_float_kv_cache: a 16-bit float KV cache must match the model.
REJECT_MISMATCHED_FLOAT_KV_SINCE = (0, 33)

# Architectures that refuse float16 as the model dtype (vLLM model files' supported dtypes).
_NO_FLOAT16 = {"gemma2", "gemma3", "gemma3_text", "gpt_oss"}
# gpt_oss.py divides num_key_value_heads // tp with no max(1, …): more ranks than KV heads
# gives 0 heads per rank and vLLM fails to start.
_NO_KV_REPLICATION = {"gpt_oss"}
# No CUDA MLA backend (FlashMLA, Triton MLA, CUTLASS MLA, FlashInfer-MLA) lists fp8_e5m2.
_MLA_KV_DTYPES = ("auto", "fp16", "bf16", "fp8", "fp8_e4m3")


def refuse(
    version: Version,
    shape: ModelShape,
    tp: int,
    kv_dtype: KVDtype,
    model_dtype: str,
    kv_explicit: bool = True,
) -> None:
    """Raise FieldError for a setup vLLM `version` refuses (its own reason in the message)."""
    version_label = version_text(version)
    for name in shape.architectures:  # ModelConfig: "Model architectures [...] are not supported"
        first = ARCHITECTURE_SINCE.get(name)
        if first is not None and not since(version, first):
            raise FieldError(
                "model",
                "vllm.architecture_not_in_release",
                version=version_label,
                arch=name,
                first=version_text(first),
            )
    arch = shape.model_type or "this model"
    if model_dtype == "fp16" and shape.model_type in _NO_FLOAT16:
        raise FieldError("dtype", "vllm.float16_unstable", arch=arch)
    sparse = any(isinstance(s, SparseMLASpec) for s in shape.layers)
    # DeepseekV32ForCausalLM.verify_and_update_config (run before the check below) turns a
    # bfloat16 cache into auto: the model's dtype, whatever it is.
    v32_bf16 = shape.model_type == "deepseek_v32" and kv_dtype.name == "bf16"
    if (
        since(version, REJECT_MISMATCHED_FLOAT_KV_SINCE)
        and kv_dtype.name in ("fp16", "bf16")
        and kv_dtype.name != model_dtype
        and not v32_bf16
    ):
        torch_names = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}
        cache, model = torch_names[kv_dtype.name], torch_names.get(model_dtype, model_dtype)
        allowed = "`auto`" + (f" or `{model}`" if model_dtype in ("fp16", "bf16") else "")
        raise FieldError(
            "kv_cache_dtype",
            "vllm.kv_dtype_incompatible",
            version_label=version_label,
            cache=cache,
            model=model,
            allowed=allowed,
        )
    if shape.quant_method is not None and model_dtype == "fp32":
        # Quantization methods list their activation dtypes (get_supported_act_dtypes):
        # bfloat16 and float16 at most (mxfp4: bfloat16 only).
        raise FieldError("dtype", "vllm.quantized_float32", method=shape.quant_method)
    if shape.quant_method == "mxfp4" and model_dtype == "fp16":
        raise FieldError(
            "dtype",
            "vllm.mxfp4_bfloat16_only",
        )
    mla_checked = shape.is_mla and since(version, MLA_DTYPE_CHECK_SINCE)
    # The backends' supported_kv_cache_dtypes (FlashAttention's supports_kv_cache_dtype) list
    # "auto" but not "bfloat16" before 0.15 (an auto cache of a bf16 model is bf16 and runs);
    # checked when the layers pick a backend (read in the 0.12.0–0.14.1 wheels for the
    # standard backends, from 0.11.1 for MLA).
    checked = mla_checked or since(version, BACKEND_KV_DTYPE_CHECK_SINCE)
    bf16_named = kv_explicit and kv_dtype.name == "bf16"
    if checked and bf16_named and not since(version, MLA_BF16_KV_SINCE):
        kind = "MLA attention" if shape.is_mla else "attention"
        raise FieldError(
            "kv_cache_dtype",
            "vllm.bf16_kv_on_hopper",
            version_label=version_label,
            kind=kind,
        )
    if mla_checked and model_dtype == "fp32":
        raise FieldError(
            "dtype",
            "vllm.mla_float32",
        )
    if mla_checked and kv_dtype.name not in _MLA_KV_DTYPES:
        raise FieldError(
            "kv_cache_dtype",
            "vllm.mla_kv_dtype",
            dtype=kv_dtype.name,
            dtypes=", ".join(_MLA_KV_DTYPES),
        )
    if mla_checked and sparse:
        _refuse_sparse_backend(version, kv_dtype, model_dtype)
    if mla_checked and sparse and kv_dtype.bits == 8 and model_dtype != "bf16":
        # Sparse MLA on SM90: FlashAttention-MLA-sparse takes no fp8 cache; FlashMLA-sparse
        # (fp8) and FlashInfer-MLA-sparse (fp8, fp8_e4m3) run bfloat16 models only.
        raise FieldError("dtype", "vllm.sparse_mla_hopper_dtype", dtype=kv_dtype.name)
    if (
        shape.model_type in _NO_KV_REPLICATION
        and not shape.is_mla
        and tp > shape.num_key_value_heads
    ):
        raise FieldError(
            "tensor_parallel_size",
            "vllm.kv_heads_below_tp",
            arch=arch,
            kv_heads=shape.num_key_value_heads,
            tp=tp,
        )


def _refuse_sparse_backend(version: Version, kv_dtype: KVDtype, model_dtype: str) -> None:
    """No sparse MLA backend on SM90 for this cache or model dtype in `version` (the backends'
    supported dtype lists; cuda.py _get_backend_priorities)."""
    label = version_text(version)
    flashmla_only = not since(version, SPARSE_FA_SINCE)
    no_e4m3 = kv_dtype.name == "fp8_e4m3" and not since(version, SPARSE_PLAIN_FP8_E4M3_SINCE)
    if no_e4m3 or (flashmla_only and kv_dtype.name == "fp16"):
        raise FieldError(
            "kv_cache_dtype", "vllm.sparse_mla_kv_dtype", version=label, dtype=kv_dtype.name
        )
    if flashmla_only and model_dtype != "bf16":
        raise FieldError("dtype", "vllm.sparse_mla_flashmla_dtype", version=label)


def refuse_pipeline(version: Version, pp: int) -> None:
    """0.9.0 runs pipeline parallelism on its V0 engine unless an executor backend is named."""
    if pp > 1 and not since(version, PP_V1_DEFAULT_SINCE):
        raise FieldError(
            "pipeline_parallel_size", "vllm.pipeline_v0", version=version_text(version)
        )
