"""vLLM refuses a checkpoint whose quantization needs a newer GPU (engines/vllm/quant_gpu.py).

The minimums are each wheel's own `get_min_capability()` (tests/oracle checks the tables); the
GPUs' compute capabilities are NVIDIA's CUDA GPUs table (A100 8.0, L40S 8.9, H100 9.0)."""

from __future__ import annotations

from typing import Any

import pytest

from planner.core.errors import FieldError
from planner.core.schema import PlanRequest
from planner.service import plan

GIB = 1 << 30


def _llama(quant: dict[str, Any]) -> dict[str, Any]:
    return {
        "model_type": "llama",
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "torch_dtype": "bfloat16",
        "quantization_config": quant,
    }


MODELOPT_FP8 = {"quant_method": "modelopt", "quant_algo": "FP8"}
MODELOPT_NVFP4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}
FP8 = {"quant_method": "fp8", "weight_block_size": [128, 128]}
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}


def _plan(quant: dict[str, Any], gpu: Any, version: str | None = None) -> Any:
    body: dict[str, Any] = {"model": _llama(quant), "gpu": gpu, "context_tokens": 4096}
    if version:
        body["engine_version"] = version
    return plan(PlanRequest.model_validate(body))


def test_modelopt_fp8_on_ampere_is_refused_by_0_11_not_0_33() -> None:
    # 0.11: ModelOptFp8Config.get_min_capability() is 89; 0.33 lowered it to 80.
    with pytest.raises(FieldError) as exc:
        _plan(MODELOPT_FP8, "A100-SXM-80GB", "0.11")
    problem = exc.value.problems[0]
    assert problem.loc == ("gpu",)
    assert "Minimum capability: 89. Current capability: 80" in problem.msg
    assert "8.9 or newer" in problem.msg
    assert _plan(MODELOPT_FP8, "A100-SXM-80GB", "0.33").capacity is not None
    assert _plan(MODELOPT_FP8, "L40S-48GB", "0.11").capacity is not None  # 8.9 is enough


def test_a_custom_gpu_is_checked_by_its_compute_capability() -> None:
    t4 = {"name": "T4", "memory_bytes": 16 * GIB, "bandwidth_bytes_per_s": 3.2e11}
    # fp8: 80 in 0.11, 75 in 0.33 — a 7.5 GPU runs it only on the newer release.
    with pytest.raises(FieldError, match=r"Minimum capability: 80\. Current capability: 75"):
        _plan(FP8, {**t4, "compute_capability": 75}, "0.11")
    assert _plan(FP8, {**t4, "compute_capability": 75}, "0.33").capacity is not None
    # A release between the two read: refused only below both minimums.
    assert _plan(FP8, {**t4, "compute_capability": 75}, "0.20").capacity is not None
    with pytest.raises(FieldError, match="quantization method awq"):
        _plan(AWQ, {**t4, "compute_capability": 70})
    # No capability given: nothing to check against.
    assert _plan(AWQ, t4).capacity is not None


def test_nvfp4_goes_by_vllms_own_name_for_it() -> None:
    # ModelOpt NVFP4 is ModelOptNvFp4Config ("modelopt_fp4"): 80 in 0.11, 75 in 0.33.
    gpu = {"memory_bytes": 16 * GIB, "bandwidth_bytes_per_s": 3.2e11, "compute_capability": 75}
    with pytest.raises(FieldError, match="modelopt_fp4 is not supported"):
        _plan(MODELOPT_NVFP4, gpu, "0.11")
    assert _plan(MODELOPT_NVFP4, gpu, "0.33").capacity is not None


def test_other_engines_and_unquantized_checkpoints_are_not_checked() -> None:
    gpu = {"memory_bytes": 16 * GIB, "bandwidth_bytes_per_s": 3.2e11, "compute_capability": 60}
    body = {"model": _llama(AWQ), "gpu": gpu, "context_tokens": 4096, "engine": "sglang"}
    assert plan(PlanRequest.model_validate(body)).capacity is not None
    plain = {k: v for k, v in _llama(AWQ).items() if k != "quantization_config"}
    assert plan(PlanRequest.model_validate({"model": plain, "gpu": gpu})).capacity is not None
