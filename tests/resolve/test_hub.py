"""Hub resolution through the real `huggingface_hub` client against a loopback Hub.

The server (tests/resolve/hub_server.py) speaks the Hub's protocol; nothing in the client is
mocked. Expected numbers come from the files the server publishes (the index's total_size, the
hand sum of the single file's tensors), not from the resolver.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from planner.core.errors import FieldError
from planner.resolve import (
    GatedModelError,
    HubSettings,
    HubUnavailableError,
    ModelFilesError,
    ModelNotFoundError,
    RevisionNotFoundError,
    cache_size,
    clear_cache,
    resolve_model,
)
from tests.resolve.conftest import (
    MODELOPT_FP8,
    SHARDED_CONFIG,
    SHARDED_TOTAL_SIZE,
    SINGLE_DATA_BYTES,
    settings,
)
from tests.resolve.hub_server import GOOD_TOKEN, HubState

Hub = tuple[str, HubState]


def test_model_not_in_catalog_resolves_with_index_total_size(hub: Hub, tmp_path: Path) -> None:
    url, state = hub
    r = resolve_model("acme/sharded-llama", settings=settings(url, tmp_path))
    assert r.source == "hub"
    assert r.id == "acme/sharded-llama"
    assert dict(r.config) == SHARDED_CONFIG
    assert r.weights_bytes == SHARDED_TOTAL_SIZE
    assert r.weights_source == "safetensors"
    assert r.weights_detail is not None and "total_size" in r.weights_detail
    assert r.revision == state.repos["acme/sharded-llama"].sha
    # The shards themselves are never fetched: the index is enough.
    assert not [q for q in state.requests if "/cdn/" in q.path]
    # The files landed in the HF_HOME cache the settings name.
    assert list((tmp_path / "hub").glob("models--acme--sharded-llama/snapshots/*/config.json"))


def test_modelopt_hf_quant_config_is_read_beside_config(hub: Hub, tmp_path: Path) -> None:
    url, _ = hub
    r = resolve_model("acme/modelopt-fp8", settings=settings(url, tmp_path))
    q = dict(r.config)["quantization_config"]
    assert q["quant_method"] == "modelopt" and q["quant_algo"] == "FP8"
    assert q["exclude_modules"] == MODELOPT_FP8["quantization"]["exclude_modules"]
    assert q["kv_cache_quant_algo"] == "FP8"
    clear_cache()
    offline = resolve_model("acme/modelopt-fp8", settings=settings(url, tmp_path, offline=True))
    assert dict(offline.config)["quantization_config"] == q  # from the client's cache


def test_unsized_modelopt_algo_is_refused_by_name(hub: Hub, tmp_path: Path) -> None:
    url, _ = hub
    with pytest.raises(FieldError) as exc:
        resolve_model("acme/modelopt-mixed", settings=settings(url, tmp_path))
    assert exc.value.problems[0].code == "model.modelopt_algo_unsized"


def test_single_file_weights_from_the_header_by_range_requests(hub: Hub, tmp_path: Path) -> None:
    url, state = hub
    r = resolve_model("acme/single-file", settings=settings(url, tmp_path))
    assert r.weights_bytes == SINGLE_DATA_BYTES
    assert r.weights_source == "safetensors"
    cdn = [q for q in state.requests if q.path.startswith("/cdn/")]
    assert cdn and all(q.range is not None for q in cdn)  # header only, never the whole file


def test_hf_endpoint_and_token_from_the_environment(
    hub: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, state = hub
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_TOKEN", GOOD_TOKEN)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    s = HubSettings()
    assert s.endpoint_url == url and s.cache_dir == tmp_path / "hub"
    r = resolve_model("acme/gated-llama", settings=s)
    assert r.weights_bytes == SHARDED_TOTAL_SIZE
    assert any(q.authorization == f"Bearer {GOOD_TOKEN}" for q in state.requests)


def test_gated_repo_without_token_names_hf_token(hub: Hub, tmp_path: Path) -> None:
    url, _ = hub
    with pytest.raises(GatedModelError) as exc:
        resolve_model("acme/gated-llama", settings=settings(url, tmp_path))
    assert exc.value.problems[0].loc == ("model",)
    assert "HF_TOKEN" in exc.value.detail


def test_gated_repo_with_a_token_without_access_says_so(hub: Hub, tmp_path: Path) -> None:
    url, _ = hub
    with pytest.raises(GatedModelError) as exc:
        resolve_model("acme/gated-llama", settings=settings(url, tmp_path, token="hf_other"))
    assert "HF_TOKEN" in exc.value.detail and "no access" in exc.value.detail


@pytest.mark.parametrize("token", [None, GOOD_TOKEN])
def test_missing_repo_names_model(hub: Hub, tmp_path: Path, token: str | None) -> None:
    url, _ = hub
    with pytest.raises(ModelNotFoundError) as exc:
        resolve_model("acme/does-not-exist", settings=settings(url, tmp_path, token=token))
    assert exc.value.problems[0].loc == ("model",)
    assert "`model`" in exc.value.detail


def test_unknown_revision_names_revision(hub: Hub, tmp_path: Path) -> None:
    url, _ = hub
    with pytest.raises(RevisionNotFoundError) as exc:
        resolve_model("acme/sharded-llama", revision="v9", settings=settings(url, tmp_path))
    assert exc.value.problems[0].loc == ("revision",)


def test_revision_is_passed_through_and_pins_the_commit(hub: Hub, tmp_path: Path) -> None:
    url, state = hub
    sha = state.repos["acme/sharded-llama"].sha
    r = resolve_model("acme/sharded-llama", revision=sha, settings=settings(url, tmp_path))
    assert r.revision == sha
    assert any(q.path.endswith(f"/revision/{sha}") for q in state.requests)


def test_repo_without_config_json(hub: Hub, tmp_path: Path) -> None:
    url, _ = hub
    with pytest.raises(ModelFilesError) as exc:
        resolve_model("acme/not-a-model", settings=settings(url, tmp_path))
    assert "config.json" in exc.value.detail


def test_repo_without_safetensors_leaves_weights_to_the_core(hub: Hub, tmp_path: Path) -> None:
    url, _ = hub
    r = resolve_model("acme/no-weights", settings=settings(url, tmp_path))
    assert r.weights_bytes is None and r.weights_source is None
    assert r.notes


def test_resolved_models_are_cached_in_process(hub: Hub, tmp_path: Path) -> None:
    url, state = hub
    s = settings(url, tmp_path)
    first = resolve_model("acme/sharded-llama", settings=s)
    before = len(state.requests)
    again = resolve_model("ACME/sharded-llama", settings=s)
    assert again is first and len(state.requests) == before
    assert cache_size() == 1


def test_the_in_process_cache_is_bounded(hub: Hub, tmp_path: Path) -> None:
    url, _ = hub
    s = settings(url, tmp_path, cache_entries=1)
    resolve_model("acme/sharded-llama", settings=s)
    resolve_model("acme/single-file", settings=s)
    assert cache_size() == 1


def test_offline_with_a_cache_still_works(hub: Hub, tmp_path: Path) -> None:
    url, state = hub
    resolve_model("acme/sharded-llama", settings=settings(url, tmp_path))
    clear_cache()
    before = len(state.requests)
    r = resolve_model("acme/sharded-llama", settings=settings(url, tmp_path, offline=True))
    assert len(state.requests) == before  # no request at all
    assert r.weights_bytes == SHARDED_TOTAL_SIZE and dict(r.config) == SHARDED_CONFIG


def test_offline_without_a_cache_says_paste_config(hub: Hub, tmp_path: Path) -> None:
    url, state = hub
    with pytest.raises(HubUnavailableError) as exc:
        resolve_model("acme/sharded-llama", settings=settings(url, tmp_path, offline=True))
    assert exc.value.problems[0].loc == ("model",)
    assert "paste" in exc.value.detail and "config.json" in exc.value.detail
    assert state.requests == []


def test_offline_from_the_environment(
    hub: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = hub
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    assert HubSettings().offline
    with pytest.raises(HubUnavailableError):
        resolve_model("acme/sharded-llama")


def test_no_network_is_a_field_error_not_a_traceback(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on `port` once the socket is closed: connection refused.
    with pytest.raises(HubUnavailableError) as exc:
        resolve_model("acme/sharded-llama", settings=settings(f"http://127.0.0.1:{port}", tmp_path))
    assert "paste" in exc.value.detail


def test_hub_access_turned_off(hub: Hub, tmp_path: Path) -> None:
    url, state = hub
    with pytest.raises(HubUnavailableError) as exc:
        resolve_model("acme/sharded-llama", settings=settings(url, tmp_path, enabled=False))
    assert "KVPLAN_HUB_ENABLED" in exc.value.detail
    assert state.requests == []


def test_catalog_ids_need_no_hub(hub: Hub, tmp_path: Path) -> None:
    url, state = hub
    r = resolve_model(
        "meta-llama/Llama-3.1-8B-Instruct", settings=settings(url, tmp_path, enabled=False)
    )
    assert r.source == "catalog" and r.aliases_matched == "meta-llama/Llama-3.1-8B-Instruct"
    assert state.requests == []


@pytest.mark.parametrize("bad", ["", "   ", "not an id", "a/b/c/d", "../../etc/passwd"])
def test_malformed_ids_are_field_errors(bad: str, tmp_path: Path) -> None:
    s = HubSettings.model_validate(
        {
            "enabled": True,
            "endpoint": "http://127.0.0.1:9",
            "hf_home": tmp_path,
            "allow_local_dirs": False,
            "token": None,
            "offline": False,
        }
    )
    with pytest.raises(FieldError) as exc:
        resolve_model(bad, settings=s)
    assert exc.value.problems[0].loc == ("model",)
