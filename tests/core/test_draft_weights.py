"""A separate draft's weights (EAGLE head, draft model) are loaded beside the target: a budget
derived from a GPU loses exactly their bytes per rank (sharded over the target's TP)."""

from __future__ import annotations

from typing import Any

import pytest

from planner.core.inputs import model_from_config
from planner.core.schema import PlanRequest
from planner.service import plan
from tests.core.test_reconcile_draft import EAGLE_HEAD

BASE: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B",
    "gpu": "H100-SXM-80GB",
    "context_tokens": 8192,
}


def _budget(**extra: Any) -> int:
    out = plan(PlanRequest.model_validate({**BASE, **extra}))
    assert out.capacity is not None
    return out.capacity.kv_budget_bytes


@pytest.mark.parametrize("tp", [1, 2])
def test_eagle_head_weights_leave_the_budget(tp: int) -> None:
    spec = {"method": "eagle", "model": EAGLE_HEAD, "num_speculative_tokens": 3}
    draft = model_from_config(EAGLE_HEAD).weights_bytes
    assert draft is not None and draft > 0
    without = _budget(tensor_parallel_size=tp)
    with_draft = _budget(tensor_parallel_size=tp, speculative_config=spec)
    assert without - with_draft == -(-draft // tp)


def test_ngram_loads_no_weights() -> None:
    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    assert _budget(speculative_config=spec) == _budget()
