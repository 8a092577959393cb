"""Resolution order without the Hub: pasted config, local directory, catalog ids and aliases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.core.errors import ModelConfigError
from planner.core.resolved import served_model
from planner.resolve import HubSettings, ModelFilesError, resolve_model
from planner.resolve.core_catalog import as_core_model
from tests.resolve.conftest import SHARDED_CONFIG, SINGLE_DATA_BYTES, SINGLE_TENSORS
from tests.resolve.hub_server import safetensors_bytes

OFF = HubSettings.model_validate(
    {"enabled": False, "token": None, "offline": False, "endpoint": "http://127.0.0.1:9"}
)


def test_a_pasted_config_is_taken_whole() -> None:
    cfg = {"model_type": "gemma3", "text_config": {"num_hidden_layers": 2}}
    r = resolve_model(cfg, settings=OFF)
    assert r.source == "request" and dict(r.config) == cfg
    assert r.weights_bytes is None and r.weights_source is None


def test_local_directory_with_an_index(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(SHARDED_CONFIG))
    index = {"metadata": {"total_size": 123_456_789}, "weight_map": {}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    r = resolve_model(str(tmp_path), settings=OFF)
    assert r.source == "local" and r.weights_bytes == 123_456_789
    assert r.weights_source == "safetensors"


def test_local_directory_sums_safetensors_headers(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(SHARDED_CONFIG))
    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(safetensors_bytes(SINGLE_TENSORS))
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(safetensors_bytes(SINGLE_TENSORS))
    r = resolve_model(str(tmp_path), settings=OFF)
    assert r.weights_bytes == 2 * SINGLE_DATA_BYTES


def test_local_fp32_checkpoint_keeps_its_stored_bytes(tmp_path: Path) -> None:
    # The index's total_size as stored; the core takes it to the engine's dtype (served_model).
    (tmp_path / "config.json").write_text(json.dumps({**SHARDED_CONFIG, "torch_dtype": "float32"}))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 4_000}, "weight_map": {}})
    )
    r = resolve_model(str(tmp_path), settings=OFF)
    assert r.weights_bytes == 4_000 and not r.notes
    core = as_core_model(r)
    assert served_model(core, "bf16")[0].weights_bytes == 2_000  # vLLM, SGLang, TensorRT-LLM
    assert served_model(core, "fp32")[0].weights_bytes == 4_000  # transformers


def test_local_directory_without_config(tmp_path: Path) -> None:
    with pytest.raises(ModelFilesError) as exc:
        resolve_model(str(tmp_path), settings=OFF)
    assert exc.value.problems[0].loc == ("model",)


@pytest.mark.parametrize(
    ("typed", "entry", "max_positions"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B", 131072),
        ("meta-llama/Meta-Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B", 131072),
        ("META-LLAMA/LLAMA-3.1-8B", "meta-llama/Llama-3.1-8B", 131072),
        ("Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B", 131072),
        # Qwen2.5 Instruct configs ship 32,768 positions (YaRN extends them): the alias says so.
        ("Qwen/Qwen2.5-72B-Instruct", "Qwen/Qwen2.5-72B", 32768),
        ("Qwen/Qwen2.5-72B", "Qwen/Qwen2.5-72B", 131072),
        ("google/gemma-2-9b-it", "google/gemma-2-9b", 8192),
        ("https://huggingface.co/openai/gpt-oss-120b", "openai/gpt-oss-120b", 131072),
    ],
)
def test_catalog_spellings_people_type(typed: str, entry: str, max_positions: int) -> None:
    r = resolve_model(typed, settings=OFF)
    assert r.source == "catalog"
    from planner.core.model import shape_from_config

    assert shape_from_config(r.config).max_position_embeddings == max_positions
    from planner.catalog import get_model

    served = get_model(typed)
    assert (served.alias_of or served.id) == entry


def test_gemma3_base_spelling_resolves_offline() -> None:
    r = resolve_model("google/gemma-3-27b", settings=OFF)
    assert r.source == "catalog" and r.aliases_matched == "google/gemma-3-27b"
    assert "text_config" in r.config  # multimodal wrapper kept whole


def test_refused_catalog_models_say_why() -> None:
    with pytest.raises(ModelConfigError) as exc:
        resolve_model("deepseek-ai/DeepSeek-V3.2", settings=OFF)
    assert "indexer" in exc.value.detail
    assert exc.value.problems[0].loc == ("model",)


def test_quantized_catalog_weights_are_sized_as_stored() -> None:
    r = resolve_model("Qwen/Qwen3-30B-A3B-FP8", settings=OFF)
    bf16 = resolve_model("Qwen/Qwen3-30B-A3B", settings=OFF)
    assert r.weights_bytes is not None and bf16.weights_bytes is not None
    # fp8 experts and attention, bf16 embeddings/norms/router: a bit over half the bf16 size.
    assert 0.5 < r.weights_bytes / bf16.weights_bytes < 0.53


@pytest.mark.parametrize(
    ("raw", "offline"), [("1", True), ("true", True), ("YES", True), ("0", False), ("", False)]
)
def test_hf_hub_offline_is_read_as_the_client_reads_it(
    raw: str, offline: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", raw)
    monkeypatch.setenv("HF_TOKEN", "")
    monkeypatch.setenv("HF_ENDPOINT", "")
    s = HubSettings()
    assert s.offline is offline and s.token is None
    assert s.endpoint_url == "https://huggingface.co"


def test_kvplan_hub_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVPLAN_HUB_ENABLED", "false")
    monkeypatch.setenv("KVPLAN_HUB_TIMEOUT_SECONDS", "2.5")
    monkeypatch.setenv("KVPLAN_HUB_CACHE_ENTRIES", "7")
    s = HubSettings()
    assert (s.enabled, s.timeout_seconds, s.cache_entries) == (False, 2.5, 7)
