"""A loopback Hub with a few repos, and an empty HF_HOME per test."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from planner.resolve import HubSettings, clear_cache
from tests.resolve.hub_server import HubState, Repo, hub_server, safetensors_bytes

# A small Llama-shaped config (not in the catalog), sharded: the index says how big it is.
SHARDED_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
    "vocab_size": 1000,
    "torch_dtype": "bfloat16",
}
SHARDED_TOTAL_SIZE = 3_211_264  # metadata.total_size the index publishes
SINGLE_TENSORS = {
    "model.embed_tokens.weight": ("BF16", [1000, 64]),
    "model.layers.0.self_attn.q_proj.weight": ("BF16", [64, 64]),
    "model.layers.0.mlp.up_proj.weight": ("F8_E4M3", [128, 64]),
    "model.norm.weight": ("F32", [64]),
}
# Hand sum of the tensors above: 1000·64·2 + 64·64·2 + 128·64·1 + 64·4.
SINGLE_DATA_BYTES = 128_000 + 8_192 + 8_192 + 256


# ModelOpt's separate quantization file (nvidia/Llama-3.1-70B-Instruct-FP8's form).
MODELOPT_FP8 = {
    "producer": {"name": "modelopt", "version": "0.23.0"},
    "quantization": {
        "quant_algo": "FP8",
        "kv_cache_quant_algo": "FP8",
        "exclude_modules": ["lm_head"],
    },
}
MODELOPT_MIXED = {
    "producer": {"name": "modelopt"},
    "quantization": {"quant_algo": "MIXED_PRECISION"},
}


def _config(**over: object) -> bytes:
    return json.dumps({**SHARDED_CONFIG, **over}).encode()


def _index(total: int) -> bytes:
    weight_map = {"lm_head.weight": "model-00002-of-00002.safetensors"}
    return json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}).encode()


@pytest.fixture(autouse=True)
def _hub_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # The suite turns the Hub off (tests/conftest.py), and the transformers cross-checks set
    # the offline variables for the whole process; these tests talk to their loopback Hub.
    monkeypatch.setenv("KVPLAN_HUB_ENABLED", "true")
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def hub() -> Iterator[tuple[str, HubState]]:
    state = HubState()
    state.add(
        "acme/sharded-llama",
        Repo(
            {
                "config.json": _config(),
                "model.safetensors.index.json": _index(SHARDED_TOTAL_SIZE),
                # Shards listed but never read: the index's total_size is the figure.
                "model-00001-of-00002.safetensors": b"\0" * 16,
                "model-00002-of-00002.safetensors": b"\0" * 16,
            }
        ),
    )
    state.add(
        "acme/single-file",
        Repo(
            {
                "config.json": _config(hidden_size=64, num_attention_heads=4),
                "model.safetensors": safetensors_bytes(SINGLE_TENSORS),
            }
        ),
    )
    state.add(
        "acme/gated-llama",
        Repo(
            {"config.json": _config(), "model.safetensors.index.json": _index(SHARDED_TOTAL_SIZE)},
            gated=True,
        ),
    )
    state.add("acme/no-weights", Repo({"config.json": _config()}))
    state.add(
        "acme/modelopt-fp8",
        Repo({"config.json": _config(), "hf_quant_config.json": json.dumps(MODELOPT_FP8).encode()}),
    )
    state.add(
        "acme/modelopt-mixed",
        Repo(
            {"config.json": _config(), "hf_quant_config.json": json.dumps(MODELOPT_MIXED).encode()}
        ),
    )
    state.add("acme/not-a-model", Repo({"README.md": b"# datasets only"}))
    with hub_server(state) as url:
        yield url, state


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


def settings(url: str, home: Path, **over: object) -> HubSettings:
    # Explicit values: whatever HF_* the machine running the tests has set must not leak in.
    base = {
        "endpoint": url,
        "hf_home": home,
        "hf_hub_cache": None,
        "token": None,
        "offline": False,
        "timeout_seconds": 5,
    }
    return HubSettings.model_validate({**base, **over})
