"""Cross-check: the planner's `engine: "transformers"` bytes for state layers (Mamba2, gated
delta net) against the conv and recurrent state tensors a real transformers 5.x cache holds
(LinearAttentionLayer), next to the attention layers' keys and values, on tiny random models."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cache_measure import STATE_CONFIGS, STATE_SEQ_LENS, measure_cache_bytes

pytestmark = pytest.mark.crosscheck

_measured: dict[tuple[str, str, int, int], dict[str, Any]] = {}


def _config(name: str, dtype: str) -> dict[str, Any]:
    return {**STATE_CONFIGS[name], "torch_dtype": dtype}


def _measure(name: str, dtype: str, n: int, steps: int) -> dict[str, Any]:
    key = (name, dtype, n, steps)
    if key not in _measured:
        _measured[key] = measure_cache_bytes(_config(name, dtype), n, decode_steps=steps)
    return _measured[key]


def _predict(config: dict[str, Any], n: int) -> int:
    from planner.core.schema import PlanRequest
    from planner.service import plan

    request = PlanRequest.model_validate(
        {"model": config, "engine": "transformers", "requests": [{"context_tokens": n}]}
    )
    return plan(request).requests[0].kv_bytes


def test_state_tensors_are_constant_and_keep_the_whole_conv_kernel() -> None:
    short, long = _measure("mamba2", "float32", 2, 0), _measure("mamba2", "float32", 20, 3)
    assert short["total_bytes"] == long["total_bytes"] > 0
    conv = [s for s in short["layers"][0]["state_shapes"] if s[0] == "conv_states"]
    # (batch, expand·hidden + 2·n_groups·state_size, conv_kernel): the whole kernel, not k − 1.
    assert conv == [("conv_states", (1, 128 + 2 * 2 * 16, 4))]


@pytest.mark.parametrize("steps", (0, 1))
@pytest.mark.parametrize("n", STATE_SEQ_LENS)
@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
@pytest.mark.parametrize("name", sorted(STATE_CONFIGS))
def test_planner_matches_real_state_cache(name: str, dtype: str, n: int, steps: int) -> None:
    if steps >= n:
        pytest.skip("decode steps need a prefill token")
    measured = _measure(name, dtype, n, steps)
    assert _predict(_config(name, dtype), n) == measured["total_bytes"], measured["layers"]
