"""DFlash speculative decoding (`speculative_config.method: "dflash"`), as vLLM sizes it.

Sources: vLLM's wheels (`vllm/config/speculative.py` names the method from 0.20.0, not in
0.19.1; `qwen3_dflash.py` builds the draft config's `num_hidden_layers` plain attention layers;
the scheduler reserves k lookahead slots in 0.20–0.22 and k + 1 from 0.23, `VllmConfig.
num_lookahead_tokens` from 0.28), and vLLM 0.33.0's own sizing code run on CPU through
tests/oracle/vllm_draft_sizing.py with the inputs below (2026-12-01): num_lookahead_tokens 4
for k = 3, 5 draft layers, 41 KV layers, num_blocks 7,992, 2,048 blocks per request, "GPU KV
cache size" 127,872 tokens, concurrency 3.9x, longest context 127,856 tokens.
"""

from __future__ import annotations

from typing import Any

import pytest

from planner.core.errors import FieldError
from planner.core.schema import PlanRequest
from planner.core.units import GiB
from planner.service import plan

# A DFlash draft config of the form vLLM loads (architecture DFlashDraftModel: a Qwen3 config
# with a dflash_config), 5 decoder layers that read 5 of Qwen3-8B's hidden states.
DRAFT: dict[str, Any] = {
    "architectures": ["DFlashDraftModel"],
    "model_type": "qwen3",
    "torch_dtype": "bfloat16",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "num_hidden_layers": 5,
    "max_position_embeddings": 40960,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "block_size": 16,
    "dflash_config": {"target_layer_ids": [1, 9, 17, 25, 33], "mask_token_id": 151669},
}


def _plan(version: str, k: int = 3) -> Any:
    return plan(
        PlanRequest.model_validate(
            {
                "model": "Qwen/Qwen3-8B",
                "engine_version": version,
                "kv_budget_bytes": 20 * GiB,
                "context_tokens": 32768,
                "block_size": 16,
                "max_num_batched_tokens": 8192,
                "async_scheduling": False,
                "speculative_config": {
                    "method": "dflash",
                    "model": DRAFT,
                    "num_speculative_tokens": k,
                },
            }
        )
    )


def test_dflash_is_sized_as_vllm_0_33_sizes_it() -> None:
    p = _plan("0.33")
    draft = p.model.draft
    assert draft.method == "dflash" and draft.kv_layers == 5
    assert draft.lookahead_tokens == 3 + 4  # k verified + num_lookahead_tokens 4
    c = p.capacity
    assert (c.num_blocks, c.blocks_per_request, c.max_requests) == (7992, 2048, 3)
    assert (c.engine_reported_tokens, c.engine_reported_concurrency) == (127872, 3.9)
    assert c.longest_context_tokens == 127856


@pytest.mark.parametrize(("version", "lookahead"), [("0.20", 3), ("0.22", 3), ("0.23", 4)])
def test_dflash_reserves_its_fill_in_slot_from_0_23(version: str, lookahead: int) -> None:
    assert _plan(version).model.draft.lookahead_tokens == 3 + lookahead


def test_dflash_before_0_20_is_refused_with_the_method_field() -> None:
    with pytest.raises(FieldError) as exc:
        _plan("0.19")
    problem = exc.value.problems[0]
    assert problem.loc == ("speculative_config", "method")
    assert "'dflash'" in problem.msg and "0.20" in problem.msg


def test_dflash_needs_its_draft() -> None:
    with pytest.raises(FieldError) as exc:
        plan(
            PlanRequest.model_validate(
                {
                    "model": "Qwen/Qwen3-8B",
                    "kv_budget_bytes": 20 * GiB,
                    "speculative_config": {"method": "dflash", "num_speculative_tokens": 3},
                }
            )
        )
    assert exc.value.problems[0].loc == ("speculative_config", "model")
