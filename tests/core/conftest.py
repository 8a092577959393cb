from __future__ import annotations

from typing import Any

import pytest

from planner.core.schema import Plan, PlanRequest
from planner.service import plan

GiB = 1 << 30
MiB = 1 << 20
KiB = 1 << 10

# Seed 004 §05 / seed 000: "L=32, Hkv=8, d=128, b=2 字节" (a Llama-3.1-8B-shaped attention stack).
SEED_CONFIG: dict[str, Any] = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "hidden_size": 4096,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}


def run(**body: Any) -> Plan:
    return plan(PlanRequest.model_validate(body))


@pytest.fixture
def seed_config() -> dict[str, Any]:
    return dict(SEED_CONFIG)
