"""plan() end to end through ResolvingCatalog: a Hub model (loopback Hub, real client), an
alias typed as people type it, and the weights each one gets."""

from __future__ import annotations

from pathlib import Path

from planner.core.plan import plan
from planner.core.schema import PlanRequest
from planner.resolve import resolve_model
from planner.resolve.core_catalog import ResolvingCatalog, as_core_model
from tests.resolve.conftest import SHARDED_TOTAL_SIZE, settings
from tests.resolve.hub_server import HubState

Hub = tuple[str, HubState]


def test_a_hub_model_plans_with_its_index_total_size(hub: Hub, tmp_path: Path) -> None:
    url, _ = hub
    catalog = ResolvingCatalog(settings(url, tmp_path))
    request = PlanRequest.model_validate(
        {"model": "acme/sharded-llama", "gpu": "H100-SXM-80GB", "context_tokens": 2048}
    )
    p = plan(request, catalog=catalog)
    assert p.model.weights_bytes == SHARDED_TOTAL_SIZE
    assert p.model.weights_source == "safetensors"


def test_an_alias_plans_with_the_aliased_config(hub: Hub, tmp_path: Path) -> None:
    url, state = hub
    catalog = ResolvingCatalog(settings(url, tmp_path, enabled=False))
    request = PlanRequest.model_validate(
        {"model": "Qwen/Qwen2.5-72B-Instruct", "kv_budget_bytes": 40 << 30}
    )
    p = plan(request, catalog=catalog)
    # The Instruct config's 32,768 positions, not the base model's 131,072.
    assert p.model.max_position_embeddings == 32768
    assert state.requests == []


def test_moe_weights_are_counted_as_stored_when_no_checkpoint_size_is_known() -> None:
    r = resolve_model(
        {
            "model_type": "mixtral",
            "num_hidden_layers": 2,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "vocab_size": 100,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
        }
    )
    core = as_core_model(r)
    # Hand count: embed + lm_head 2·100·64; per layer q,o 64·64, k,v 64·32, 4 experts of
    # 3·64·128, router 64·4, 2 norms of 64; final norm 64. Two bytes each.
    per_layer = 2 * 64 * 64 + 2 * 64 * 32 + 4 * 3 * 64 * 128 + 64 * 4 + 2 * 64
    params = 2 * 100 * 64 + 2 * per_layer + 64
    assert core.num_parameters == params
    assert core.weights_bytes == 2 * params and core.weights_source == "parameter_count"
