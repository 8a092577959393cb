"""A float32 checkpoint's weights take the bytes of the dtype each engine serves it in (issue 22,
item 3). The resolver and the catalog report what the checkpoint stores (4 bytes a parameter);
`planner.core.resolved.served_model` takes that to the engine's dtype (`Engine.model_dtype`).

The model is Llama-3.2-1B's config marked float32: 1,235,814,400 parameters (the catalog's
published Hugging Face safetensors parameter count), no quantization, so every tensor is at
the model dtype: 4,943,257,600 B stored, 2,471,628,800 B in a 16-bit dtype."""

from __future__ import annotations

from typing import Any

import pytest

from planner.catalog import get_model
from planner.core.draft_weights import eagle_draft_weight_bytes
from planner.core.resolved import model_from_config, served_model
from planner.core.schema import PlanRequest
from planner.service import plan
from tests.core.test_reconcile_draft import EAGLE_HEAD

PARAMS = 1_235_814_400
FP32 = {**get_model("meta-llama/Llama-3.2-1B").config, "torch_dtype": "float32"}


def _plan(engine: str, model: Any = None, **extra: Any) -> Any:
    body = {"model": model or FP32, "engine": engine, "context_tokens": 4096, **extra}
    return plan(PlanRequest.model_validate({"gpu": "H100-SXM-80GB", **body}))


def test_the_config_counts_the_published_parameters() -> None:
    m = model_from_config(FP32)
    assert m.num_parameters == PARAMS
    assert m.weights_bytes == 4 * PARAMS  # as stored: float32


# vLLM 0.9.2–0.33.0 config/model.py `_resolve_auto_dtype`: "if config_dtype == torch.float32:
# config_dtype = preferred_dtype", the platform's first supported dtype; platforms/cuda.py
# `supported_dtypes` is [torch.bfloat16, torch.float16, torch.float32] from capability 8.0.
@pytest.mark.parametrize("version", [None, "0.9", "0.19.0"])
def test_vllm_serves_fp32_in_bf16(version: str | None) -> None:
    out = _plan("vllm", engine_version=version) if version else _plan("vllm")
    assert (out.dtype, out.kv_cache_dtype) == ("bf16", "bf16")
    assert out.model.weights_bytes == 2 * PARAMS


# SGLang 0.5.23 (and 0.5.21) srt/configs/model_config.py `_get_and_verify_dtype`: with dtype
# "auto" a float32 config becomes torch.float16 ("Following the common practice"), except
# model_type gemma* -> torch.bfloat16.
def test_sglang_serves_fp32_in_fp16_and_gemma_in_bf16() -> None:
    out = _plan("sglang")
    assert (out.dtype, out.kv_cache_dtype) == ("fp16", "fp16")
    assert out.model.weights_bytes == 2 * PARAMS
    gemma = _plan("sglang", "google/gemma-2-9b")
    assert gemma.dtype == "bf16"
    assert gemma.model.weights_bytes == 2 * 9_241_705_984  # published parameter count


# TensorRT-LLM: no rule read from its code (docs/engine-rules.md says so); kvplan keeps bf16.
def test_trtllm_keeps_fp32_in_bf16() -> None:
    out = _plan("trtllm")
    assert out.dtype == "bf16" and out.model.weights_bytes == 2 * PARAMS


# transformers 5.24 modeling_utils.py `from_pretrained`: "if dtype is None: dtype = 'auto'", and
# `_get_dtype` resolves "auto" to config.dtype: a float32 checkpoint loads in float32.
def test_transformers_serves_fp32_at_4_bytes_a_parameter() -> None:
    out = _plan("transformers")
    assert (out.dtype, out.kv_cache_dtype) == ("fp32", "fp32")
    assert out.model.weights_bytes == 4 * PARAMS
    assert out.capacity is not None and out.capacity.budget is not None
    assert out.capacity.budget.weights_bytes_per_rank == 4 * PARAMS
    asked = _plan("transformers", dtype="bfloat16")  # told otherwise: 16-bit
    assert asked.model.weights_bytes == 2 * PARAMS


def test_the_budget_moves_by_the_weight_difference() -> None:
    # transformers' budget is the GPU's memory less weights and a flat reserve: the fp32
    # weights take exactly their extra 2 bytes a parameter out of it.
    fp32, bf16 = _plan("transformers"), _plan("transformers", dtype="bfloat16")
    assert fp32.capacity is not None and bf16.capacity is not None
    assert bf16.capacity.kv_budget_bytes - fp32.capacity.kv_budget_bytes == 2 * PARAMS


def test_the_start_check_sees_the_fp32_weights() -> None:
    # OLMo-2-0325-32B is published in float32: 32,234,279,936 parameters × 4 B ≈ 129 GB do not
    # fit an 80 GB GPU in transformers; in bf16 (vLLM, or transformers told so) they do.
    model = "allenai/OLMo-2-0325-32B"
    fp32 = _plan("transformers", model)
    assert fp32.capacity is not None and not fp32.capacity.engine_starts
    assert fp32.capacity.limited_by == "weights_exceed_memory"
    for out in (_plan("transformers", model, dtype="bfloat16"), _plan("vllm", model)):
        assert out.capacity is not None and out.capacity.engine_starts
        assert out.model.weights_bytes == 2 * 32_234_279_936


def test_served_model_converts_stored_bytes_once() -> None:
    stored = model_from_config(FP32, weights_bytes=4_000, weights_source="safetensors")
    half, notes = served_model(stored, "bf16")
    assert half.weights_bytes == 2_000 and [n.code for n in notes] == ["weights.served_dtype"]
    same, notes = served_model(stored, "fp32")
    assert same is stored and notes == []
    # A 16-bit checkpoint upcast (vLLM --dtype float32: "Upcasting ... is allowed") doubles.
    bf16 = model_from_config({**FP32, "torch_dtype": "bfloat16"})
    assert served_model(bf16, "fp32")[0].weights_bytes == 4 * PARAMS


def test_a_draft_takes_the_targets_dtype() -> None:
    # vLLM config/speculative.py builds the draft's ModelConfig with
    # dtype=self.target_model_config.dtype: an fp32 EAGLE head is held in bf16 beside a bf16
    # target, as a bf16 one is.
    fp32_head = {**EAGLE_HEAD, "torch_dtype": "float32"}
    bf16_head = {**EAGLE_HEAD, "torch_dtype": "bfloat16"}
    assert eagle_draft_weight_bytes(fp32_head, "eagle", 4096, 2) == eagle_draft_weight_bytes(
        bf16_head, "eagle", 4096
    )
    assert eagle_draft_weight_bytes(fp32_head, "eagle", 4096) == 2 * eagle_draft_weight_bytes(
        bf16_head, "eagle", 4096
    )
