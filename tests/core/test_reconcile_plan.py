"""One engine, two readers: a vLLM log and the PlanRequest it implies give the same figures.

The log reader turns the log into a PlanRequest (model, the release its lines name, TP/PP, KV
dtype, block size, max_model_len, max_num_batched_tokens), resolves it with `inputs.resolve`
(what plan() does) and recomputes each logged figure from those Inputs. Here the equivalent
request is written by hand from each fixture (tests/fixtures/engine_logs.jsonl: the log's own
lines, the settings its thread states), with the KV memory its "Available KV cache memory" line
prints as the budget, and plan() must print the figures the reader predicted, and the log
itself where the reader finds it equal (the fixtures' own hand arithmetic).
"""

from __future__ import annotations

from typing import Any

import pytest

import planner.core.reconcile as core_reconcile
from planner.core.reconcile_common import Ctx
from planner.core.schema import PlanRequest
from planner.core.units import GiB
from planner.service import plan
from tests.core.test_reconcile import INPUTS, check, run

# fixture id -> (release its lines name, the logged "Available KV cache memory" GiB, the
# request fields the log and its thread settle besides the model)
CASES: dict[str, tuple[str, str, dict[str, Any]]] = {
    # kv_cache_utils.py:864/868 (0.10.2); "Maximum concurrency for 32,768 tokens".
    "vllm-v1-qwen3-14b-lmcache1739": ("0.10.2", "6.51", {"context_tokens": 32768}),
    # An fp8 KV cache (the thread), "Maximum concurrency for 100,000 tokens".
    "vllm-v1-fp8kv-mml100k-vllm25350": (
        "0.10.2",
        "10.55",
        {"kv_cache_dtype": "fp8", "context_tokens": 100000},
    ),
    # kv_cache_utils.py:1087/1091 (0.11.0); max_position_embeddings 131,072 is the length.
    "vllm-v1-granite4-micro-fp8-l40s-ibmcodeengine": ("0.11", "35.34", {"context_tokens": 131072}),
    # Kimi-Linear at TP 2, "Maximum concurrency for 120,000 tokens"; the block size is the
    # release's own for its KDA state (none is logged).
    "vllm-v1-kimi-linear-awq-tp2-3090-vllm28228": (
        "0.11",
        "2.30",
        {"tensor_parallel_size": 2, "context_tokens": 120000},
    ),
}


def _request(fixture_id: str, **more: Any) -> PlanRequest:
    release, _, fields = CASES[fixture_id]
    model, _ = INPUTS[fixture_id]
    body = {"model": model, "engine": "vllm", "engine_version": release, **fields, **more}
    return PlanRequest.model_validate(body)


def _reader_inputs(fixture_id: str, monkeypatch: pytest.MonkeyPatch) -> Ctx:
    """The context the vLLM reader is handed (its Inputs included)."""
    seen: list[Ctx] = []
    read = core_reconcile.read_log

    def keep(ctx: Ctx) -> str:
        seen.append(ctx)
        return read(ctx)

    monkeypatch.setattr(core_reconcile, "read_log", keep)
    run(fixture_id)
    return seen[-1]


@pytest.mark.parametrize("fixture_id", list(CASES))
def test_the_log_and_its_plan_request_give_the_same_figures(fixture_id: str) -> None:
    release, available_gib, _ = CASES[fixture_id]
    result = run(fixture_id)
    assert result.engine_version == release
    budget = round(float(available_gib) * GiB)
    planned = plan(_request(fixture_id, kv_budget_bytes=budget))
    cap = planned.capacity
    assert cap is not None
    tokens = check(result, "gpu_kv_cache_tokens")
    assert tokens.predicted == cap.engine_reported_tokens
    concurrency = check(result, "max_concurrency")
    assert concurrency.predicted == cap.engine_reported_concurrency
    for c in (tokens, concurrency):
        if c.status == "equal":
            assert c.logged == c.predicted  # the log's own figure, through plan()


@pytest.mark.parametrize("fixture_id", list(CASES))
def test_the_reader_resolves_the_request_the_log_implies(
    fixture_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = _reader_inputs(fixture_id, monkeypatch)
    assert ctx.inputs is not None, ctx.inputs_reason
    hand = plan(_request(fixture_id))
    # The reader's request carries what the log settled explicitly (block size, scheduler
    # tokens, the allowance for a logged max_model_len); resolved, it is the same plan.
    request = ctx.inputs.request
    assert isinstance(request, PlanRequest)
    ours = plan(request)
    assert ours == hand
