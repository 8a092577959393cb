"""A separate draft's weights (EAGLE head, draft model) are loaded beside the target: a budget
derived from a GPU loses exactly their bytes per rank (sharded over the target's TP).

An EAGLE head's config is a whole one-layer Llama config, but vLLM 0.33 gives the draft the
target's embedding (and, for EAGLE-1, its LM head): what it adds is pinned to published
checkpoint sizes below, not to the planner's own count."""

from __future__ import annotations

from typing import Any

import pytest

from planner.core.draft_weights import eagle_draft_parameters, eagle_draft_weight_bytes
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
    draft = eagle_draft_weight_bytes(EAGLE_HEAD, "eagle", 4096)
    without = _budget(tensor_parallel_size=tp)
    with_draft = _budget(tensor_parallel_size=tp, speculative_config=spec)
    assert without - with_draft == -(-draft // tp)


def test_ngram_loads_no_weights() -> None:
    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    assert _budget(speculative_config=spec) == _budget()


# thomaskiefer/EAGLE3-Apertus-8B-Instruct-2509, model card table (LlamaForCausalLMEagle3:
# hidden 4096, intermediate 21504, 32 heads, 8 KV heads, 1 layer, vocab 131,072, draft vocab
# 32,000, bfloat16) and its published size: "Parameters ~513M".
APERTUS_EAGLE3 = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 21504,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 1,
    "vocab_size": 131072,
    "draft_vocab_size": 32000,
    "torch_dtype": "bfloat16",
}


def test_eagle3_head_counts_its_checkpoint_not_a_whole_model() -> None:
    params = eagle_draft_parameters(APERTUS_EAGLE3, "eagle3", 4096)
    assert abs(params - 513_000_000) < 500_000  # "~513M"
    assert eagle_draft_weight_bytes(APERTUS_EAGLE3, "eagle3", 4096) == params * 2


def test_eagle1_head_leaves_out_the_embedding_it_shares() -> None:
    # yuhuili/EAGLE-LLaMA3-Instruct-8B (the shape of EAGLE_HEAD) is a 1.55 GB checkpoint
    # (vllm-project/vllm#9565, comment of 2024-12-13): its layer and fc plus a copy of the
    # target's 128,256 × 4,096 embedding, which vLLM replaces by the target's own.
    shipped_embedding = 128256 * 4096
    params = eagle_draft_parameters(EAGLE_HEAD, "eagle", 4096)
    assert round((params + shipped_embedding) * 2 / 1e9, 2) == 1.55


def test_a_draft_narrower_than_its_target_keeps_its_embedding() -> None:
    # _maybe_share_embeddings shares only when the widths match.
    own = eagle_draft_parameters(APERTUS_EAGLE3, "eagle3", 5120)
    assert own - eagle_draft_parameters(APERTUS_EAGLE3, "eagle3", 4096) == 131072 * 4096


def test_pasted_eagle3_head_moves_the_budget_by_its_bytes() -> None:
    spec = {"method": "eagle3", "model": APERTUS_EAGLE3, "num_speculative_tokens": 3}
    assert _budget() - _budget(speculative_config=spec) == eagle_draft_weight_bytes(
        APERTUS_EAGLE3, "eagle3", 4096
    )
