"""vLLM 0.9 and 0.10: the release facts read in their wheels that the plain oracle grid
(tests/oracle, fixtures of 0.9.2 and 0.10.2) does not reach, each pinned to the file that shows
it, with the release on either side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.catalog import get_model
from planner.core.errors import FieldError
from planner.core.schema import PlanRequest
from planner.service import plan

HYBRID = {
    m["id"]: m["config"]
    for m in json.loads(
        (Path(__file__).parents[1] / "fixtures" / "hybrid_models.json").read_text()
    )["models"]
}


def _plan(model: dict[str, Any], version: str, **kw: Any) -> Any:
    body = {
        "model": model,
        "engine": "vllm",
        "engine_version": version,
        "kv_budget_bytes": 10 << 30,
        "context_tokens": 8192,
        **kw,
    }
    return plan(PlanRequest.model_validate(body))


def _refusal(model: dict[str, Any], version: str, **kw: Any) -> tuple[str, str]:
    with pytest.raises(FieldError) as err:
        _plan(model, version, **kw)
    problem = err.value.problems[0]
    return problem.field, problem.code


def test_state_layers_run_on_v0_before_0_10_2() -> None:
    # vllm/engine/arg_utils.py `_is_v1_supported_oracle`: 0.10.1 still falls back to V0 for
    # `model_config.has_inner_state` ("V1 mamba models are unoptimized"); 0.10.2 dropped it.
    granite = HYBRID["ibm-granite/granite-4.0-h-tiny"]
    assert _refusal(granite, "0.10.1") == ("engine_version", "vllm.state_layers_v0")
    assert _refusal(granite, "0.9.2") == ("engine_version", "vllm.state_layers_v0")
    assert _plan(granite, "0.10.2").capacity is not None


def test_gpt_oss_is_registered_from_0_10_1() -> None:
    # vllm/model_executor/models/registry.py: "GptOssForCausalLM" first in 0.10.1's wheel.
    gpt_oss = dict(get_model("openai/gpt-oss-20b").config)
    assert _refusal(gpt_oss, "0.10.0") == ("model", "vllm.architecture_not_in_release")
    assert _plan(gpt_oss, "0.10.1").capacity is not None


def test_async_scheduling_is_an_argument_from_0_10() -> None:
    # EngineArgs.async_scheduling first in 0.10.0's vllm/engine/arg_utils.py (the 0.9.2 oracle
    # records EngineArgs refusing the keyword).
    llama = dict(get_model("meta-llama/Llama-3.1-8B").config)
    assert _refusal(llama, "0.9.2", async_scheduling=True) == (
        "async_scheduling",
        "vllm.async_scheduling_unknown",
    )
    assert _plan(llama, "0.9.2", async_scheduling=False).capacity is not None
    assert _plan(llama, "0.10.0", async_scheduling=True).capacity is not None


def test_fp8_inc_kv_cache_from_0_10() -> None:
    # CacheDType in vllm/config.py (0.9.2) lacks "fp8_inc"; vllm/config/cache.py (0.10.0) has it.
    llama = dict(get_model("meta-llama/Llama-3.1-8B").config)
    assert _refusal(llama, "0.9.2", kv_cache_dtype="fp8_inc") == (
        "kv_cache_dtype",
        "engine.kv_dtype_unsupported",
    )
    assert _plan(llama, "0.10.0", kv_cache_dtype="fp8_inc").capacity is not None


def test_vllm_0_9_0_has_no_hybrid_kv_cache_manager() -> None:
    # 0.9.0's kv_cache_utils.get_kv_cache_config has only the uniform-type path:
    # unify_hybrid_kv_cache_specs sizes Gemma-3's sliding layers as full attention, and
    # _get_kv_cache_config_uniform_type logs max_concurrency = num_blocks × block_size /
    # max_model_len. 0.9.1 adds _get_kv_cache_config_uniform_page_size (hybrid groups).
    gemma3 = dict(get_model("google/gemma-3-27b-it").config)
    body = {"kv_budget_bytes": 40 << 30, "context_tokens": 32768, "max_num_batched_tokens": 8192}
    old = _plan(gemma3, "0.9.0", **body).capacity
    assert [(g.kind, g.layers, g.padding_layers) for g in old.kv_groups] == [("full", 62, 0)]
    # page = 16 tokens × K,V × 16 KV heads × 128 × 2 B = 131,072 B; 40 GiB // (62 × page) = 5,285
    assert old.num_blocks == 5285
    assert old.engine_reported_concurrency == round(5285 * 16 / 32768, 2) == 2.58
    new = _plan(gemma3, "0.9.1", **body).capacity
    assert {g.kind for g in new.kv_groups} == {"full", "sliding"}


def test_vllm_0_9_0_runs_pipeline_parallelism_on_v0() -> None:
    # 0.9.0's _is_v1_supported_oracle: PP > 1 with distributed_executor_backend not in ("ray",
    # "mp", "external_launcher") falls back to V0, and the default is None; 0.9.1 lists
    # ParallelConfig.distributed_executor_backend (the default) among them.
    llama = dict(get_model("meta-llama/Llama-3.1-8B").config)
    assert _refusal(llama, "0.9.0", pipeline_parallel_size=2) == (
        "pipeline_parallel_size",
        "vllm.pipeline_v0",
    )
    assert _plan(llama, "0.9.1", pipeline_parallel_size=2).capacity is not None
    assert _plan(llama, "0.9.0").capacity is not None
