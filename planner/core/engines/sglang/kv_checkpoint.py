"""The KV cache dtype SGLang takes from a checkpoint's own declaration (planner.core.kv_declared)
for --kv-cache-dtype auto (the rule and its sources: planner.core.engines.sglang.releases)."""

from __future__ import annotations

from planner.core.engines.sglang.releases import KV_FP8_METHODS
from planner.core.engines.versions import Version
from planner.core.model import ModelShape


def checkpoint_kv_dtype(version: Version, shape: ModelShape, explicit: bool) -> str | None:
    """fp8_e4m3 where the model's quant_config says kv_cache_quant_algo "FP8" and auto was
    asked, else None (the dtype asked, auto the model's)."""
    d = shape.kv_declared
    if explicit or d is None or not d.method.startswith(KV_FP8_METHODS):
        return None
    if d.method == "compressed-tensors":
        fp8 = d.scheme is not None and (
            d.field("type") == "float"
            and d.field("num_bits") == 8
            and d.field("strategy") == "tensor"
            and bool(d.field("symmetric", True))
            and not d.field("dynamic", False)
        )
    elif d.method.startswith("modelopt") and d.scheme is not None:
        fp8 = d.field("type") == "float" and d.field("num_bits") == 8
    else:
        fp8 = (d.algo or "").upper() == "FP8"
    return "fp8_e4m3" if fp8 else None


__all__ = ["checkpoint_kv_dtype"]
