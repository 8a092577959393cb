"""Whether vLLM runs a checkpoint's quantization on a GPU: `VllmConfig._get_quantization_config`
raises when the device's compute capability is below the method's `get_min_capability()`.

The minimums were read from the wheels themselves (every `QuantizationConfig` subclass;
tests/oracle checks these tables against vLLM 0.11.0 and 0.33.0). A release between them is
refused only below both tables' minimum, since its own figure was not read.
"""

from __future__ import annotations

from planner.core.engines.versions import Version, version_text
from planner.core.errors import FieldError
from planner.core.hardware import Gpu
from planner.core.model import ModelShape

# quantization method (vLLM's name) -> minimum compute capability (major × 10 + minor)
MIN_CAPABILITY_0_11: dict[str, int] = {
    "awq": 75,
    "bitsandbytes": 70,
    "compressed-tensors": 70,
    "fbgemm_fp8": 80,
    "fp8": 80,
    "gguf": 60,
    "gptq": 60,
    "modelopt": 89,
    "modelopt_fp4": 80,
    "mxfp4": 80,
    "quark": 70,
    "torchao": 75,
}
MIN_CAPABILITY_0_33: dict[str, int] = {
    "awq": 75,
    "compressed-tensors": 70,
    "fbgemm_fp8": 80,
    "fp8": 75,
    "gptq": 60,
    "modelopt": 80,
    "modelopt_fp4": 75,
    "mxfp4": 80,
    "quark": 70,
    "torchao": 75,
}
READ_AT: dict[tuple[int, int], dict[str, int]] = {
    (0, 11): MIN_CAPABILITY_0_11,
    (0, 33): MIN_CAPABILITY_0_33,
}


def min_capability(version: Version, method: str) -> int | None:
    """The release's minimum for `method`, or None where no table names it."""
    table = READ_AT.get((version[0], version[1]))
    if table is not None:
        return table.get(method)
    known = [t[method] for t in READ_AT.values() if method in t]
    return min(known) if known else None


def check_quantization_on_gpu(version: Version, shape: ModelShape, gpu: Gpu) -> None:
    """Raise FieldError("gpu") where vLLM `version` refuses the checkpoint on this GPU."""
    method, cap = shape.quant_method, gpu.compute_capability
    if method is None or cap is None:
        return
    need = min_capability(version, method)
    if need is None or cap >= need:
        return
    raise FieldError(
        "gpu",
        "vllm.quantization_capability",
        version=version_text(version),
        method=method,
        need=need,
        cap=cap,
        gpu=gpu.name,
        need_major=need // 10,
        need_minor=need % 10,
    )


__all__ = [
    "MIN_CAPABILITY_0_11",
    "MIN_CAPABILITY_0_33",
    "check_quantization_on_gpu",
    "min_capability",
]
