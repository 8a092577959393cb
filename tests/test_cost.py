"""The cost estimate (planner/cost.py): read from the request's shape, an upper bound of the answer
that `plan()` itself produces, and refusals that name the limit and its setting."""

from __future__ import annotations

from typing import Any

import pytest

from planner.core.schema import PlanRequest
from planner.cost import Budget, config_layers, plan_cost, plan_shape, sweep_cost
from planner.service import plan

BUDGET = Budget(max_work_units=2_000_000, max_response_bytes=8 << 20, inline_work_units=2_000)
QUESTION_48_GIB = {
    "model": "meta-llama/Llama-3.1-8B",
    "kv_cache_dtype": "bf16",
    "context_tokens": 8192,
    "kv_budget_bytes": 51539607552,
}


def pasted(layers: int, **extra: Any) -> dict[str, Any]:
    return {
        "model_type": "llama",
        "num_hidden_layers": layers,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 1 << 24,
        "torch_dtype": "bfloat16",
        **extra,
    }


# The sweep of the first defect: 24 KB of body, 256 points with include_plans over a
# 4096-layer TensorRT-LLM config with 4096 distinct windows; measured at 37 s of CPU and a 244 MB
# answer on the server that had no admission.
DEFECT_1_BASE = {
    "model": pasted(4096),
    "engine": "trtllm",
    "kv_budget_bytes": 51539607552,
    "max_attention_window": list(range(1, 4097)),
}


def test_layers_come_from_the_config_or_its_text_config() -> None:
    assert config_layers(pasted(48)) == (48, 1)
    assert config_layers({"text_config": pasted(26)})[0] == 26
    types = ["sliding_attention", "full_attention"] * 8
    assert config_layers({"layer_types": types}) == (16, 2)
    # Out-of-range or missing sizes are clamped: the estimate never exceeds what is accepted.
    assert config_layers(pasted(10**9))[0] == 4096
    assert config_layers({})[0] == 1


def test_catalog_question_is_cheap_enough_to_run_inline() -> None:
    cost = plan_cost(PlanRequest.model_validate(QUESTION_48_GIB))
    assert BUDGET.inline(cost)
    assert BUDGET.refusal(cost) is None


def test_defect_1_sweep_is_refused_before_any_work() -> None:
    base = PlanRequest.model_validate(DEFECT_1_BASE)
    cost = sweep_cost(base, 256, include_plans=True)
    # The issue measured a 244 MB answer: the estimate is in that range, not far below it.
    assert cost.response_bytes >= 200_000_000
    reason = BUDGET.refusal(cost)
    assert reason is not None and "KVPLAN_MAX_REQUEST_COST" in reason


def test_answer_size_refusal_names_its_setting() -> None:
    big = Budget(max_work_units=10**12, max_response_bytes=8 << 20, inline_work_units=0)
    base = PlanRequest.model_validate(DEFECT_1_BASE)
    reason = big.refusal(sweep_cost(base, 256, include_plans=True))
    assert reason is not None and "KVPLAN_MAX_RESPONSE_BYTES" in reason
    # Without the plans attached, the same grid's answer is small.
    assert big.refusal(sweep_cost(base, 256, include_plans=False)) is None


@pytest.mark.parametrize(
    "request_body",
    [
        QUESTION_48_GIB,
        {"model": pasted(512), "kv_budget_bytes": 1 << 35, "pipeline_parallel_size": 64},
        {
            "model": pasted(256),
            "kv_budget_bytes": 1 << 35,
            "requests": [{"context_tokens": 1000 + i} for i in range(256)],
        },
        {**DEFECT_1_BASE, "model": pasted(1024), "max_attention_window": list(range(1, 1025))},
        {"model": pasted(2048), "kv_budget_bytes": 1 << 35, "pipeline_parallel_size": 1024},
    ],
    ids=["catalog", "pp64", "256-entries", "1024-windows", "pp1024"],
)
def test_answer_estimate_bounds_the_real_answer(request_body: dict[str, Any]) -> None:
    """`plan()` is the oracle: its JSON is never larger than estimated, nor 4x smaller."""
    request = PlanRequest.model_validate(request_body)
    actual = len(plan(request).model_dump_json())
    estimate = plan_cost(request).response_bytes
    assert actual <= estimate < 4 * actual


def test_estimate_grows_with_every_size() -> None:
    def units(**extra: Any) -> int:
        body = {"model": pasted(extra.pop("layers", 64)), "kv_budget_bytes": 1 << 35, **extra}
        return plan_cost(PlanRequest.model_validate(body)).work_units

    base = units()
    assert units(layers=128) > base
    assert units(pipeline_parallel_size=8) > base
    assert units(requests=[{"context_tokens": 100 + i} for i in range(8)]) > base
    windowed = {"engine": "trtllm", "max_attention_window": [1024, 2048, 4096]}
    assert units(**windowed) > units(engine="trtllm")


def test_windows_count_distinct_values_up_to_the_layers() -> None:
    body = {**DEFECT_1_BASE, "model": pasted(32)}
    assert plan_shape(PlanRequest.model_validate(body)).windows == 32
    repeated = {**DEFECT_1_BASE, "max_attention_window": [4096] * 4096}
    assert plan_shape(PlanRequest.model_validate(repeated)).windows == 1
