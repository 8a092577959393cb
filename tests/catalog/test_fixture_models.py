"""Real start-up logs whose model is now in the catalog reconcile with the model *named*.

For each fixture (tests/fixtures/engine_logs.jsonl) whose `model` is a bundled id or alias, the
reconciliation with that id gives the same predictions as with the geometry the fixture's own
hand recomputation uses (tests/core/test_reconcile.py INPUTS), which is the outside check.
"""

from __future__ import annotations

from typing import Any

import pytest

from planner.catalog import find_model
from planner.core.reconcile_schema import ReconcileRequest
from planner.service import reconcile
from tests.core.test_logparse import ENGINE
from tests.core.test_reconcile import FIXTURES, INPUTS

KNOWN = {
    fid: f["model"]
    for fid, f in FIXTURES.items()
    if isinstance(f.get("model"), str) and find_model(f["model"]) is not None
}


def _predictions(fixture_id: str, model: Any) -> list[tuple[str, float | None]]:
    fixture = FIXTURES[fixture_id]
    _, settings = INPUTS[fixture_id]
    body = {
        "log": "\n".join(fixture["log_lines"]),
        "model": model,
        "engine": ENGINE[fixture["engine"]],
        "settings": settings,
    }
    result = reconcile(ReconcileRequest.model_validate(body))
    return [(c.figure, c.predicted) for c in result.checks]


def test_the_models_people_named_in_these_logs_are_bundled() -> None:
    # Before this catalog only the 8B and gpt-oss were; the ids below are as the logs wrote them.
    assert {
        "meta-llama/Llama-3.1-8B-Instruct",
        "Qwen/Qwen3-235B-A22B-FP8",
        "Qwen/Qwen3-14B",
        "Qwen/Qwen3-1.7B",
    } <= set(KNOWN.values())


@pytest.mark.parametrize("fixture_id", sorted(KNOWN))
def test_named_model_reconciles_like_the_hand_geometry(fixture_id: str) -> None:
    hand_model, _ = INPUTS[fixture_id]
    named = _predictions(fixture_id, KNOWN[fixture_id])
    assert named == _predictions(fixture_id, hand_model)
    assert any(predicted is not None for _, predicted in named)
