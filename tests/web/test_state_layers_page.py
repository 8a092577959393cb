"""An unknown layer type is refused by name and index on the API, the CLI and the page."""

from __future__ import annotations

import json

from starlette.testclient import TestClient
from typer.testing import CliRunner

from planner.cli import app as cli_app
from tests.web.test_page import error_text

CONFIG = {
    "model_type": "granitemoehybrid",
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "hidden_size": 64,
    "layer_types": ["mamba", "attention", "retention", "mamba"],
    "mamba_n_heads": 4, "mamba_d_head": 32, "mamba_d_state": 16, "mamba_n_groups": 1,
    "mamba_d_conv": 4, "mamba_expand": 2,
}  # fmt: skip
BODY = {"model": CONFIG, "kv_budget_bytes": 1 << 30, "context_tokens": 4096}


def test_api_refuses_unknown_layer_type(client: TestClient) -> None:
    r = client.post("/api/v1/plan", json=BODY)
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json"
    errors = r.json()["errors"]
    assert errors[0]["loc"] == ["model", "layer_types", 2]
    assert "'retention'" in errors[0]["msg"] and "layer 2" in errors[0]["msg"]


def test_cli_refuses_unknown_layer_type() -> None:
    r = CliRunner().invoke(cli_app, ["plan", "--request", "-"], input=json.dumps(BODY))
    assert r.exit_code == 2 and r.stdout == ""
    problem = json.loads(r.stderr)
    assert problem["errors"][0]["field"] == "model.layer_types[2]"
    assert "'retention'" in problem["errors"][0]["msg"]


def test_page_refuses_unknown_layer_type(client: TestClient) -> None:
    r = client.post(
        "/",
        data={"model_config": json.dumps(CONFIG), "kv_budget_gib": "1", "context_tokens": "4096"},
    )
    assert r.status_code == 200
    assert "'retention'" in error_text(r.text, "model_config")


def test_page_plans_a_hybrid_and_shows_its_state_layers(client: TestClient) -> None:
    # GraniteMoeHybridConfig's default length is 2,048 tokens: this config gives its own.
    config = {
        **CONFIG,
        "layer_types": ["mamba", "attention", "mamba", "mamba"],
        "max_position_embeddings": 4096,
    }
    r = client.post(
        "/",
        data={"model_config": json.dumps(config), "kv_budget_gib": "1", "context_tokens": "4096"},
    )
    assert r.status_code == 200
    # mamba2_state_shape: conv (3, 128 + 2·1·16) and SSM (4, 32, 16), bf16.
    state = (3 * (128 + 32) + 4 * 32 * 16) * 2
    assert "mamba (mamba2)" in r.text and f"{state:,} B" in r.text
