"""vLLM's own code as the oracle for kv_cache_dtype auto on a checkpoint that declares its KV
cache (planner.core.engines.vllm.kv_checkpoint): tests/oracle/vllm_sizing.py run on a ModelOpt
FP8 config.json (kv_cache_quant_algo, then kv_cache_scheme) in the 0.33.0 wheel, stored as
fixtures/vllm/0.33.0/vllm_kv_checkpoint.json. EngineArgs.create_engine_config resolves the cache
dtype (resolve_kv_cache_dtype_string) and the page size follows it. The compressed-tensors rule
sits in Attention.__init__, which the harness does not run (it builds layers without their
constructors), so it is pinned to the wheels' lines in tests/core/test_kv_checkpoint.py instead."""

from __future__ import annotations

from typing import Any

import pytest

from planner.catalog import get_model
from planner.core.capacity import MAX_CONTEXT_SEARCH
from planner.core.schema import PlanRequest
from planner.service import plan
from tests.oracle.matrix import oracle_results

pytestmark = pytest.mark.oracle

RELEASE = "0.33.0"
MODELOPT = {"quant_method": "modelopt", "quant_algo": "FP8", "exclude_modules": ["lm_head"]}
FP8_SCHEME = {"type": "float", "num_bits": 8, "dynamic": False}
# (id, quantization_config or None, kv_cache_dtype)
CASES = [
    ("modelopt-algo-auto", {**MODELOPT, "kv_cache_quant_algo": "FP8"}, "auto"),
    ("modelopt-scheme-auto", {**MODELOPT, "kv_cache_scheme": FP8_SCHEME}, "auto"),
    ("modelopt-algo-bfloat16", {**MODELOPT, "kv_cache_quant_algo": "FP8"}, "bfloat16"),
    ("plain-auto", None, "auto"),
]
SETTINGS: dict[str, Any] = {
    "tensor_parallel_size": 1,
    "pipeline_parallel_size": 1,
    "kv_budget_bytes": 40 * 2**30,
    "context_tokens": 8192,
    "max_num_batched_tokens": 8192,
    "async_scheduling": True,
}


def _config(quant: dict[str, Any] | None) -> dict[str, Any]:
    config = dict(get_model("meta-llama/Llama-3.1-8B").config)
    return config if quant is None else {**config, "quantization_config": quant}


def _inputs() -> list[dict[str, Any]]:
    return [
        {
            "id": cid,
            "config": _config(quant),
            "kv_cache_dtype": kv,
            "dtype": "auto",
            "block_size": 16,
            "longest_search_cap": MAX_CONTEXT_SEARCH,
            **SETTINGS,
        }
        for cid, quant, kv in CASES
    ]


@pytest.mark.parametrize(("cid", "quant", "kv"), CASES, ids=[c[0] for c in CASES])
def test_page_bytes_follow_the_checkpoint_kv_dtype(cid: str, quant: Any, kv: str) -> None:
    got = oracle_results(RELEASE, "vllm_sizing.py", _inputs(), name="vllm_kv_checkpoint")[cid]
    p = plan(
        PlanRequest.model_validate(
            {
                "model": _config(quant),
                "engine": "vllm",
                "engine_version": RELEASE,
                "kv_cache_dtype": kv,
                "block_size": 16,
                **SETTINGS,
            }
        )
    )
    assert got["accepted"], got["error"]
    assert p.capacity is not None
    fp8 = got["cache_dtype"] == "fp8_e4m3"
    assert p.kv_bytes_per_token == 2 * 32 * 8 * 128 * (1 if fp8 else 2), got["cache_dtype"]
    assert p.per_rank.page_bytes == got["page_bytes_per_layer"]  # one layer's block
    assert p.capacity.num_blocks == got["num_blocks"]
