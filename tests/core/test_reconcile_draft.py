"""Reconcile and plan a logged deployment with a speculative draft (vllm#19996: Llama-3.1-8B with
an EAGLE head on one H100). The expected figures are the log's own lines and the fixture's hand
recomputation (`recomputed.expected`), never this implementation's output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.core.errors import FieldError
from planner.core.reconcile_schema import ReconcileRequest, ReconcileResult
from planner.core.schema import PlanRequest
from planner.service import plan, reconcile

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "engine_logs_drafts.jsonl"
EAGLE_LOG = next(
    json.loads(line) for line in FIXTURES.read_text("utf-8").splitlines() if "vllm19996" in line
)
# yuhuili/EAGLE-LLaMA3.1-Instruct-8B's published config.json (the KV-relevant fields): EAGLE-1
# heads for Llama-3.1-8B are one Llama decoder layer.
EAGLE_HEAD = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "torch_dtype": "float16",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 1,
    "max_position_embeddings": 2048,
    "vocab_size": 128256,
}
SPEC = {"method": "eagle", "model": EAGLE_HEAD, "num_speculative_tokens": 3}
EXPECTED = EAGLE_LOG["recomputed"]["expected"]


def _reconcile(settings: dict[str, Any]) -> ReconcileResult:
    body = {
        "log": "\n".join(EAGLE_LOG["log_lines"]),
        "model": "meta-llama/Llama-3.1-8B",
        "engine": "vllm",
        "settings": settings,
    }
    return reconcile(ReconcileRequest.model_validate(body))


def _check(result: ReconcileResult, figure: str) -> Any:
    return next(c for c in result.checks if c.figure == figure)


@pytest.mark.parametrize(
    "settings", [{"speculative_config": SPEC}, {"draft_layers": 1}], ids=["spec", "count"]
)
def test_reconcile_with_the_draft_declared_is_exact(settings: dict[str, Any]) -> None:
    result = _reconcile(settings)
    tokens = _check(result, "gpu_kv_cache_tokens")
    assert tokens.status == "equal"
    assert tokens.predicted == EXPECTED["gpu_kv_cache_tokens"] == 410128
    conc = _check(result, "max_concurrency")
    assert conc.status == "equal"
    assert conc.predicted == EXPECTED["max_concurrency"] == 3.13


def test_reconcile_without_the_draft_names_it() -> None:
    result = _reconcile({})
    tokens = _check(result, "gpu_kv_cache_tokens")
    assert tokens.status == "different"
    assert tokens.predicted == 422944  # 26,434 blocks × 16: the target's 32 layers only
    assert "draft" in (tokens.reason or "")


def test_reconcile_plan_request_carries_the_draft() -> None:
    result = _reconcile({"speculative_config": SPEC})
    body = result.plan_request
    assert body is not None and body["speculative_config"]["method"] == "eagle"
    assert not any("no field for the" in n for n in result.notes)
    p = plan(PlanRequest.model_validate({**body, "context_tokens": 131072}))
    cap = p.capacity
    assert cap is not None
    assert (cap.num_blocks, cap.engine_reported_tokens, cap.engine_reported_concurrency) == (
        EXPECTED["num_blocks"],
        EXPECTED["gpu_kv_cache_tokens"],
        EXPECTED["max_concurrency"],
    )


def _plan(**extra: Any) -> Any:
    body = {
        "model": "meta-llama/Llama-3.1-8B",
        "engine": "vllm",
        "engine_version": "0.9.1",
        "kv_budget_bytes": round(51.63 * (1 << 30)),  # the log's Available KV cache memory
        "context_tokens": 131072,
        "block_size": 16,
        **extra,
    }
    return plan(PlanRequest.model_validate(body))


def test_plan_with_eagle_matches_the_log() -> None:
    p = _plan(speculative_config=SPEC)
    cap = p.capacity
    assert cap is not None
    assert cap.num_blocks == EXPECTED["num_blocks"] == 25633
    assert cap.engine_reported_tokens == 410128
    assert cap.engine_reported_concurrency == 3.13
    assert [(g.kind, g.layers) for g in cap.kv_groups] == [("full", 33)]
    assert p.model.draft is not None and p.model.draft.kv_layers == 1
    # allocate_slots: 3 draft tokens verified + 3 lookahead slots for the EAGLE drafter
    assert p.model.draft.lookahead_tokens == 6
    # without the draft: the log's figure is 3.1 % lower than the target-only answer
    bare = _plan().capacity
    assert bare is not None and bare.engine_reported_tokens == 422944


def test_lookahead_counts_for_shorter_requests_only() -> None:
    # A request of 4,095 tokens reserves 4,101 slots while decoding (3 drafts + 3 lookahead):
    # 257 blocks of 16, not 256. Of the 25,632 usable blocks, 99 such requests fit, not 100
    # (100 × 256 = 25,600 would without the lookahead).
    def fits(n: int) -> bool | None:
        cap = _plan(
            speculative_config=SPEC, requests=[{"context_tokens": 4095, "count": n}]
        ).capacity
        assert cap is not None
        return cap.workload_fits

    assert fits(99) is True
    assert fits(100) is False
    # At max_model_len the reservation is capped (allocate_slots' min(…, max_model_len)).
    p = _plan(speculative_config=SPEC)
    assert p.capacity is not None and p.capacity.blocks_per_request == 8192


def test_acceptance_rate_gives_tokens_per_step() -> None:
    p = _plan(
        speculative_config={**SPEC, "acceptance_rate": 0.5}, gpu="H100-SXM-80GB", weights_bytes=0
    )
    spec = p.bounds.speculative
    # 1 + 0.5 + 0.25 + 0.125 tokens per step with k = 3
    assert spec.tokens_per_step == pytest.approx(1.875)
    assert spec.seconds_per_accepted_token == pytest.approx(spec.step_seconds / 1.875)
    assert spec.draft_read_seconds > 0


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"method": "eagle", "num_speculative_tokens": 3}, "speculative_config.model"),
        ({"method": "eagle", "model": EAGLE_HEAD}, "speculative_config.num_speculative_tokens"),
        (
            {"method": "ngram", "model": EAGLE_HEAD, "num_speculative_tokens": 2},
            "speculative_config.model",
        ),
        ({"method": "mtp", "num_speculative_tokens": 1}, "speculative_config.method"),
        ({**SPEC, "model": "no/such-draft"}, "speculative_config.model"),
    ],
)
def test_bad_speculative_config_names_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(FieldError) as exc:
        _plan(speculative_config=spec)
    assert exc.value.problems[0].field == field


@pytest.mark.parametrize("engine", ["sglang", "trtllm", "transformers"])
def test_engines_without_draft_rules_refuse(engine: str) -> None:
    body = {"model": "meta-llama/Llama-3.1-8B", "engine": engine, "kv_budget_bytes": 1 << 34,
            "context_tokens": 8192, "speculative_config": SPEC}  # fmt: skip
    with pytest.raises(FieldError) as exc:
        plan(PlanRequest.model_validate(body))
    assert exc.value.problems[0].field == "speculative_config"
