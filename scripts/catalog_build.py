"""Build planner/catalog/models.json from the saved sources in catalog/sources/ (issue #22).

Layout (outside the `planner` package, so the wheel ships only the built models.json):

    catalog/sources/order.json          {"schema_version": 2, "order": [entry ids, in order]}
    catalog/sources/<org>--<name>/      one folder per entry (the id with "/" as "--")
        config.json                     the entry's config.json as saved (the published fields)
        model.safetensors.index.json    optional: the published index ({"metadata":
                                        {"total_size": N}} is enough), where weights_bytes is
                                        its total_size
        hf_quant_config.json            optional: a ModelOpt checkpoint's separate quantization
                                        file as published (entry.json "hf_quant_config" names it)
        entry.json                      everything else: id, sources, num_parameters, notes,
                                        aliases, refused, in the key order models.json prints

In entry.json, `"config": "config.json"` and `"weights_bytes": "model.safetensors.index.json"`
name the file the value comes from (the key keeps its place in the entry); an index is only
read where `weights_bytes_source` names its `total_size` (a model-card figure stays a number).

    .venv/bin/python scripts/catalog_build.py           # write models.json from the folders
    .venv/bin/python scripts/catalog_build.py --check   # exit 1 if models.json would change
    .venv/bin/python scripts/catalog_build.py --split   # write the folders from models.json

Every built entry is validated as the catalog loads it (its config resolves, a published
parameter count agrees with the config's), so a bad folder fails the build, not the service.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "catalog" / "sources"
MODELS_JSON = ROOT / "planner" / "catalog" / "models.json"
ORDER = "order.json"
ENTRY = "entry.json"
CONFIG = "config.json"
INDEX = "model.safetensors.index.json"
QUANT = "hf_quant_config.json"


class BuildError(ValueError):
    """A source folder that does not make a catalog entry (the message names it)."""


def folder_name(model_id: str) -> str:
    if "--" in model_id or model_id.count("/") != 1 or model_id.strip() != model_id:
        raise BuildError(f"{model_id!r}: an id is one org/name pair without '--'")
    return model_id.replace("/", "--")


def dump(data: Any, indent: int) -> str:
    return json.dumps(data, indent=indent, ensure_ascii=False) + "\n"


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise BuildError(f"{_rel(path)}: {exc}") from exc


def _from_index(path: Path) -> int:
    index = _read(path)
    meta = index.get("metadata") if isinstance(index, dict) else None
    total = meta.get("total_size") if isinstance(meta, dict) else None
    if not isinstance(total, int) or isinstance(total, bool) or total <= 0:
        raise BuildError(f"{_rel(path)}: no positive integer metadata.total_size")
    return total


def _names_total_size(entry: dict[str, Any]) -> bool:
    """The weights are a safetensors index's total_size (the catalog's own test, `weights`)."""
    source = str(entry.get("weights_bytes_source") or "")
    return "total_size" in source and "safetensors" in source


def build_entry(folder: Path) -> dict[str, Any]:
    """One models.json entry from its folder, keys in entry.json's order."""
    where = _rel(folder)
    meta = _read(folder / ENTRY)
    if not isinstance(meta, dict) or not isinstance(meta.get("id"), str):
        raise BuildError(f"{where}/{ENTRY}: an object with an id")
    if folder_name(meta["id"]) != folder.name:
        raise BuildError(f"{where}: holds {meta['id']}, whose folder is {folder_name(meta['id'])}")
    if meta.get("config") != CONFIG:
        raise BuildError(f'{where}/{ENTRY}: "config" must be "{CONFIG}" (the saved file)')
    has_index = (folder / INDEX).is_file()
    from_index = meta.get("weights_bytes") == INDEX
    if from_index and not _names_total_size(meta):
        raise BuildError(
            f"{where}/{ENTRY}: weights_bytes from {INDEX} needs a weights_bytes_source "
            "naming the safetensors metadata.total_size it cites"
        )
    if has_index and not from_index:
        raise BuildError(f'{where}: {INDEX} is saved but weights_bytes is not "{INDEX}"')
    if from_index and not has_index:
        raise BuildError(f"{where}: weights_bytes names {INDEX}, which is not saved")
    has_quant = (folder / QUANT).is_file()
    if has_quant != (meta.get("hf_quant_config") == QUANT):
        raise BuildError(f"{where}: {QUANT} is saved exactly when entry.json names it")
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if key == "hf_quant_config":
            quant = _read(folder / QUANT)
            if not isinstance(quant, dict):
                raise BuildError(f"{where}/{QUANT}: not a JSON object")
            out[key] = quant
        elif key == "config":
            config = _read(folder / CONFIG)
            if not isinstance(config, dict):
                raise BuildError(f"{where}/{CONFIG}: not a JSON object")
            out[key] = config
        elif key == "weights_bytes" and from_index:
            out[key] = _from_index(folder / INDEX)
        else:
            out[key] = value
    return out


def _folders(sources: Path) -> list[Path]:
    """The entry folders (split removes only these: a folder being made, without its
    entry.json yet, stays, and the build names it)."""
    return sorted(p.parent for p in sources.glob(f"*/{ENTRY}"))


def build(sources: Path = SOURCES) -> str:
    """models.json's text from the folders, in order.json's order, every entry validated."""
    order = _read(sources / ORDER)
    ids = order.get("order") if isinstance(order, dict) else None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise BuildError(f'{ORDER}: {{"schema_version": N, "order": [the entry ids]}}')
    if "schema_version" not in order:
        raise BuildError(f"{ORDER}: no schema_version")
    if len(set(ids)) != len(ids):
        raise BuildError(f"{ORDER}: an id is listed twice")
    listed = {folder_name(i) for i in ids}
    found = {p.name for p in sources.iterdir() if p.is_dir()}  # a folder without entry.json too
    if listed - found:
        raise BuildError(f"{ORDER}: no folder for {', '.join(sorted(listed - found))}")
    if found - listed:
        raise BuildError(f"{ORDER} does not list the folders {', '.join(sorted(found - listed))}")
    models = [build_entry(sources / folder_name(i)) for i in ids]
    _check_entries(models)
    return dump({"schema_version": order["schema_version"], "models": models}, indent=1)


def _check_entries(models: list[dict[str, Any]]) -> None:
    """As planner.catalog loads and checks an entry: the schema, unique ids and aliases, the
    config resolving, a published parameter count agreeing with the config's."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from planner.catalog import CatalogModel, _validate
    from planner.core.errors import PlanError

    seen: set[str] = set()
    for raw in models:
        try:
            entry = CatalogModel.model_validate(raw)
            _validate(entry)
        except (ValueError, PlanError) as exc:  # pydantic's ValidationError is a ValueError
            raise BuildError(f"{raw.get('id')}: {exc}") from exc
        for key in (entry.id, *(a.id for a in entry.aliases)):
            if key.lower() in seen:
                raise BuildError(f"{key} is listed twice (ids and aliases are unique)")
            seen.add(key.lower())


def split_entry(entry: dict[str, Any]) -> dict[str, str]:
    """The files (name -> text) of one entry's folder; build_entry reads them back."""
    meta: dict[str, Any] = {}
    files: dict[str, str] = {CONFIG: dump(entry["config"], indent=2)}
    for key, value in entry.items():
        if key == "config":
            meta[key] = CONFIG
        elif key == "hf_quant_config":
            files[QUANT] = dump(value, indent=2)
            meta[key] = QUANT
        elif key == "weights_bytes" and _names_total_size(entry):
            files[INDEX] = dump({"metadata": {"total_size": value}}, indent=2)
            meta[key] = INDEX
        else:
            meta[key] = value
    files[ENTRY] = dump(meta, indent=2)
    return files


def _same_json(path: Path, text: str) -> bool:
    """A saved file already says this, keys in the same order (it is kept as saved: a
    config.json as the Hub formats it, an index with its weight map)."""
    try:
        saved = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return False
    new = json.loads(text)
    if path.name == INDEX:
        return (
            isinstance(saved, dict)
            and (saved.get("metadata") or {}).get("total_size") == (new["metadata"]["total_size"])
        )
    return dump(saved, 1) == dump(new, 1)


def split(models_json: Path = MODELS_JSON, sources: Path = SOURCES) -> int:
    """Write the folders from models.json: files that differ are rewritten, folders of ids no
    longer listed removed. Returns the number of files written."""
    data = json.loads(models_json.read_text("utf-8"))
    ids = [m["id"] for m in data["models"]]
    sources.mkdir(parents=True, exist_ok=True)
    written = 0
    keep = {folder_name(i) for i in ids}
    for old in _folders(sources):
        if old.name not in keep:
            shutil.rmtree(old)
    for entry in data["models"]:
        folder = sources / folder_name(entry["id"])
        folder.mkdir(exist_ok=True)
        files = split_entry(entry)
        for optional in (INDEX, QUANT):
            if optional not in files and (folder / optional).exists():  # no longer cited
                (folder / optional).unlink()
        for name, text in files.items():
            if not _same_json(folder / name, text):
                (folder / name).write_text(text, "utf-8")
                written += 1
    order = dump({"schema_version": data["schema_version"], "order": ids}, indent=1)
    if not _same_json(sources / ORDER, order):
        (sources / ORDER).write_text(order, "utf-8")
        written += 1
    return written


def _changed(old: str, new: str) -> list[str]:
    """Ids whose entries differ (or are added or dropped) between two models.json texts."""
    try:
        before = {m["id"]: m for m in json.loads(old)["models"]}
    except (ValueError, KeyError, TypeError):
        return ["(models.json does not parse)"]
    after = {m["id"]: m for m in json.loads(new)["models"]}
    diff = [i for i in after if dump(after[i], 1) != dump(before.get(i), 1)]
    diff += [f"{i} (dropped)" for i in before if i not in after]
    if not diff and list(before) != list(after):
        diff = ["(the order)"]
    return diff or ["(formatting)"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if models.json would change")
    mode.add_argument("--split", action="store_true", help="write the folders from models.json")
    args = parser.parse_args(argv)
    if args.split:
        written = split()
        print(f"{SOURCES.relative_to(ROOT)}: {written} files written")
        return 0
    try:
        text = build()
    except BuildError as exc:
        print(f"catalog_build: {exc}", file=sys.stderr)
        return 2
    old = MODELS_JSON.read_text("utf-8") if MODELS_JSON.is_file() else ""
    if text == old:
        print(f"{MODELS_JSON.relative_to(ROOT)}: up to date")
        return 0
    if args.check:
        changed = _changed(old, text)
        print(
            f"{MODELS_JSON.relative_to(ROOT)} differs from {SOURCES.relative_to(ROOT)} in: "
            f"{', '.join(changed[:10])}{' …' if len(changed) > 10 else ''}; "
            "run scripts/catalog_build.py",
            file=sys.stderr,
        )
        return 1
    MODELS_JSON.write_text(text, "utf-8")
    print(f"{MODELS_JSON.relative_to(ROOT)}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
