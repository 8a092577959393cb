"""The catalog is built from its saved sources (issue #22): catalog/sources/ holds one folder per
entry (config.json as saved, the safetensors index where the weights are its total_size,
entry.json with the rest) and scripts/catalog_build.py writes planner/catalog/models.json from
them. Edit the folders, run the script; these tests fail if models.json was edited by hand."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "catalog" / "sources"
MODELS_JSON = ROOT / "planner" / "catalog" / "models.json"


def _script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "catalog_build", ROOT / "scripts" / "catalog_build.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["catalog_build"] = module
    spec.loader.exec_module(module)
    return module


cb = _script()
MODELS: list[dict[str, Any]] = json.loads(MODELS_JSON.read_text("utf-8"))["models"]


def test_build_gives_models_json_byte_for_byte() -> None:
    assert cb.build() == MODELS_JSON.read_text("utf-8"), (
        "models.json differs from catalog/sources: run scripts/catalog_build.py"
    )


def test_check_mode_passes_on_the_repo() -> None:
    assert cb.main(["--check"]) == 0


def test_every_folder_is_one_listed_entry() -> None:
    order = json.loads((SOURCES / cb.ORDER).read_text("utf-8"))
    assert order["order"] == [m["id"] for m in MODELS]
    folders = sorted(p.name for p in SOURCES.iterdir() if p.is_dir())
    assert folders == sorted(cb.folder_name(m["id"]) for m in MODELS)
    for folder in folders:
        names = {p.name for p in (SOURCES / folder).iterdir()}
        assert {cb.ENTRY, cb.CONFIG} <= names <= {cb.ENTRY, cb.CONFIG, cb.INDEX, cb.QUANT}, folder


@pytest.mark.parametrize("entry", MODELS, ids=[m["id"] for m in MODELS])
def test_every_entry_round_trips(entry: dict[str, Any], tmp_path: Path) -> None:
    """split -> build gives the same entry, keys in the same order, and the saved folder is
    what split writes (so --split after a merge changes nothing it need not)."""
    folder = tmp_path / cb.folder_name(entry["id"])
    folder.mkdir()
    files = cb.split_entry(entry)
    for name, text in files.items():
        (folder / name).write_text(text, "utf-8")
    assert cb.dump(cb.build_entry(folder), 1) == cb.dump(entry, 1)
    saved = SOURCES / folder.name
    for name, text in files.items():
        assert cb._same_json(saved / name, text), f"{saved.name}/{name}"


def test_index_total_size_is_the_weights_bytes() -> None:
    """Where an entry's weights_bytes_source names a safetensors total_size, the folder saves the
    index and the built weights_bytes is its metadata.total_size; a model-card figure (gpt-oss)
    stays a number in entry.json, with no index."""
    cited = [m for m in MODELS if "safetensors" in str(m.get("weights_bytes_source"))]
    assert cited, "at least one entry cites a safetensors index"
    for m in MODELS:
        folder = SOURCES / cb.folder_name(m["id"])
        meta = json.loads((folder / cb.ENTRY).read_text("utf-8"))
        if m in cited:
            index = json.loads((folder / cb.INDEX).read_text("utf-8"))
            assert m["weights_bytes"] == index["metadata"]["total_size"], m["id"]
            assert meta["weights_bytes"] == cb.INDEX
            assert "total_size" in m["weights_bytes_source"]
        else:
            assert not (folder / cb.INDEX).exists(), m["id"]
            assert meta.get("weights_bytes") == m.get("weights_bytes")
    from planner.catalog import get_model

    for m in cited:
        assert get_model(m["id"]).weights()[1] == "safetensors"


def _copy(tmp_path: Path, ids: list[str]) -> Path:
    sources = tmp_path / "sources"
    sources.mkdir()
    for i in ids:
        shutil.copytree(SOURCES / cb.folder_name(i), sources / cb.folder_name(i))
    order = {"schema_version": 2, "order": ids}
    (sources / cb.ORDER).write_text(cb.dump(order, 1), "utf-8")
    return sources


QWEN = "Qwen/Qwen3-Coder-30B-A3B-Instruct"
LLAMA = "meta-llama/Llama-3.1-8B"


def test_build_reads_the_index_and_refuses_bad_folders(tmp_path: Path) -> None:
    sources = _copy(tmp_path, [LLAMA, QWEN])
    built = json.loads(cb.build(sources))["models"]
    assert [m["id"] for m in built] == [LLAMA, QWEN]
    qwen = sources / cb.folder_name(QWEN)
    (qwen / cb.INDEX).write_text('{"metadata": {"total_size": 123}, "weight_map": {}}', "utf-8")
    assert json.loads(cb.build(sources))["models"][1]["weights_bytes"] == 123

    # An index whose source does not say so, a missing index, an unlisted folder: refused.
    meta = json.loads((qwen / cb.ENTRY).read_text("utf-8"))
    (qwen / cb.ENTRY).write_text(
        cb.dump({**meta, "weights_bytes_source": "model card"}, 2), "utf-8"
    )
    with pytest.raises(cb.BuildError, match="total_size"):
        cb.build(sources)
    (qwen / cb.ENTRY).write_text(cb.dump(meta, 2), "utf-8")
    (qwen / cb.INDEX).unlink()
    with pytest.raises(cb.BuildError, match="not saved"):
        cb.build(sources)
    (qwen / cb.INDEX).write_text('{"metadata": {"total_size": 123}}', "utf-8")
    shutil.copytree(SOURCES / cb.folder_name("Qwen/Qwen3-8B"), sources / "Qwen--Qwen3-8B")
    with pytest.raises(cb.BuildError, match="does not list the folders Qwen--Qwen3-8B"):
        cb.build(sources)
    (sources / "Qwen--Qwen3-8B" / cb.ENTRY).unlink()  # a folder being made: named too
    with pytest.raises(cb.BuildError, match="does not list the folders Qwen--Qwen3-8B"):
        cb.build(sources)
    shutil.rmtree(sources / "Qwen--Qwen3-8B")
    order = {"schema_version": 2, "order": [LLAMA, QWEN, "Qwen/Qwen3-8B"]}
    (sources / cb.ORDER).write_text(cb.dump(order, 1), "utf-8")
    with pytest.raises(cb.BuildError, match="no folder for Qwen--Qwen3-8B"):
        cb.build(sources)


def test_build_validates_as_the_catalog_loads(tmp_path: Path) -> None:
    """A config that does not resolve, or a published count the config disagrees with, fails
    the build (not the service at its first request)."""
    sources = _copy(tmp_path, [LLAMA])
    folder = sources / cb.folder_name(LLAMA)
    meta = json.loads((folder / cb.ENTRY).read_text("utf-8"))
    assert meta["num_parameters_source"].startswith("published")
    (folder / cb.ENTRY).write_text(cb.dump({**meta, "num_parameters": 7_000_000_000}, 2), "utf-8")
    with pytest.raises(cb.BuildError, match="published"):
        cb.build(sources)
    (folder / cb.ENTRY).write_text(cb.dump(meta, 2), "utf-8")
    config = json.loads((folder / cb.CONFIG).read_text("utf-8"))
    (folder / cb.CONFIG).write_text(cb.dump({**config, "num_key_value_heads": 5}, 2), "utf-8")
    with pytest.raises(cb.BuildError, match="num_key_value_heads"):
        cb.build(sources)


def test_split_then_build_is_the_identity(tmp_path: Path) -> None:
    """--split over a fresh directory and a build from it give models.json back; a second split
    writes nothing, and a folder whose id left models.json is removed."""
    sources = tmp_path / "sources"
    stale = sources / "org--gone"
    stale.mkdir(parents=True)
    (stale / cb.ENTRY).write_text('{"id": "org/gone"}', "utf-8")
    indexes = sum(cb._names_total_size(m) for m in MODELS)  # the saved safetensors indexes
    quant = sum("hf_quant_config" in m for m in MODELS)  # the saved ModelOpt hf_quant_configs
    assert cb.split(MODELS_JSON, sources) == 2 * len(MODELS) + indexes + quant + 1  # + order
    assert not stale.exists()
    assert cb.build(sources) == MODELS_JSON.read_text("utf-8")
    assert cb.split(MODELS_JSON, sources) == 0


def test_a_modelopt_file_is_read_beside_its_config(tmp_path: Path) -> None:
    """hf_quant_config.json is saved as published and read into the entry's quantization."""
    entry = next(m for m in MODELS if m["id"] == "nvidia/Llama-3.1-70B-Instruct-FP8")
    assert entry["hf_quant_config"]["producer"]["name"] == "modelopt"
    assert "quantization_config" not in entry["config"]  # config.json stays as published
    folder = tmp_path / cb.folder_name(entry["id"])
    folder.mkdir()
    for name, text in cb.split_entry(entry).items():
        (folder / name).write_text(text, "utf-8")
    assert cb.build_entry(folder) == entry
    (folder / cb.QUANT).unlink()
    with pytest.raises(cb.BuildError, match=cb.QUANT):
        cb.build_entry(folder)
