"""The KV cache dtype vLLM takes from a checkpoint's own declaration (planner.core.kv_declared),
by release (the facts and their sources: planner.core.engines.vllm.releases)."""

from __future__ import annotations

from planner.core.engines.versions import Version, since
from planner.core.engines.vllm.releases import (
    CT_KV_SCHEME_AUTO_ONLY_SINCE,
    CT_KV_SCHEME_SINCE,
    MODELOPT_KV_AUTO_SINCE,
    MODELOPT_KV_NVFP4_SINCE,
)
from planner.core.model import ModelShape

UNSUPPORTED = "unsupported"  # a declaration the engine does not load


def _modelopt(version: Version, shape: ModelShape) -> str | None:
    # get_kv_cache_quant_algo_string: the scheme first, then kv_cache_quant_algo; an
    # unrecognised one is "auto" (the model dtype).
    d = shape.kv_declared
    assert d is not None
    nvfp4 = since(version, MODELOPT_KV_NVFP4_SINCE)
    if d.scheme:
        if d.field("type") != "float":
            return None
        if d.field("num_bits") == 8 and d.field("dynamic") is False:
            return "fp8_e4m3"
        return "nvfp4" if nvfp4 and d.field("num_bits") == 4 else None
    names = {"fp8": "fp8_e4m3", **({"nvfp4": "nvfp4"} if nvfp4 else {})}
    return names.get((d.algo or "").lower())


def checkpoint_kv_dtype(version: Version, shape: ModelShape, explicit: bool) -> str | None:
    """The KV cache dtype vLLM `version` runs instead of the one asked (`explicit`: a
    --kv-cache-dtype other than auto), None where it runs the one asked."""
    d = shape.kv_declared
    if d is None:
        return None
    if d.method.startswith("modelopt"):
        return (
            None
            if explicit or not since(version, MODELOPT_KV_AUTO_SINCE)
            else _modelopt(version, shape)
        )
    if d.method != "compressed-tensors" or d.scheme is None or shape.is_mla:
        return None
    if not since(version, CT_KV_SCHEME_SINCE):
        return None
    if explicit and since(version, CT_KV_SCHEME_AUTO_ONLY_SINCE):
        return None
    # CompressedTensorsKVCacheMethod.validate_kv_cache_scheme loads float 8-bit schemes only.
    return "fp8" if d.field("type") == "float" and d.field("num_bits") == 8 else UNSUPPORTED


__all__ = ["UNSUPPORTED", "checkpoint_kv_dtype"]
