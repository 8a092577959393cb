"""Model resolution: turn what a user typed (or pasted) into a config.json and weight bytes.

Order: a pasted config object → a local model directory → the bundled catalog (ids, aliases
and the spellings people type, any case) → the Hugging Face Hub through `huggingface_hub`.
This is the shell around the pure core: it reads files and the network, the core never does.
The result carries the config as published (multimodal wrappers whole: the core reads
`text_config`) and the weights as stored, with where that figure came from.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from planner.catalog.suggest import likely_typo, suggest_models
from planner.core.config_fields import json_constant
from planner.core.errors import FieldError, ModelConfigError
from planner.resolve.errors import (
    GatedModelError,
    HubUnavailableError,
    ModelFilesError,
    ModelNotFoundError,
    RevisionNotFoundError,
)
from planner.resolve.safetensors_files import SafetensorsError, local_weights_bytes

if TYPE_CHECKING:  # pydantic-settings loads only when the Hub or a directory is asked
    from planner.resolve.settings import HubSettings

WeightsSource = Literal["safetensors", "parameter_count", "request"]
Source = Literal["request", "local", "catalog", "hub"]

# A Hub repo id: owner/name, letters, digits, '-', '_', '.'; 96 chars per part (Hub rules).
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}$")
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-/]{0,199}$")
_PREFIXES = ("https://huggingface.co/", "http://huggingface.co/", "hf://", "huggingface.co/")
MAX_CONFIG_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    """A model ready for the core: its config.json and (when known) its weight bytes."""

    id: str | None
    config: Mapping[str, Any]
    weights_bytes: int | None
    weights_source: WeightsSource | None  # None: unknown, the core estimates from the config
    source: Source
    revision: str | None = None  # the Hub commit the files came from
    aliases_matched: str | None = None  # the catalog alias the typed id matched, if any
    weights_detail: str | None = None  # which file or figure the weight bytes come from
    num_parameters: int | None = None  # published count (catalog), if any
    notes: tuple[str, ...] = field(default=())


def _freeze(config: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(config))


# --- in-process cache ------------------------------------------------------------------------


class _Lru:
    """A small thread-safe LRU of resolved Hub models (keyed by endpoint, id, revision)."""

    def __init__(self) -> None:
        self._data: OrderedDict[tuple[str, str, str | None], ResolvedModel] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str | None]) -> ResolvedModel | None:
        with self._lock:
            hit = self._data.get(key)
            if hit is not None:
                self._data.move_to_end(key)
            return hit

    def put(self, key: tuple[str, str, str | None], value: ResolvedModel, limit: int) -> None:
        if limit <= 0:
            return
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > limit:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


_CACHE = _Lru()


def clear_cache() -> None:
    """Forget every Hub model resolved in this process."""
    _CACHE.clear()


def cache_size() -> int:
    return len(_CACHE)


# --- the steps -------------------------------------------------------------------------------


def _served(config: Mapping[str, Any], weights: int | None) -> tuple[int | None, tuple[str, ...]]:
    """Stored bytes as an engine holds them: fp32 checkpoints are served in 16-bit."""
    inner = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else config
    assert isinstance(inner, Mapping)
    dtype = str(inner.get("torch_dtype", inner.get("dtype", config.get("torch_dtype", ""))))
    if weights is None or "quantization_config" in config or "quantization_config" in inner:
        return weights, ()
    if dtype.removeprefix("torch.").lower() in ("float32", "float"):
        return weights // 2, (
            "The checkpoint is stored in float32; engines serve it in 16-bit, so the weights "
            "count half the stored bytes.",
        )
    return weights, ()


def _from_request(config: Mapping[str, Any]) -> ResolvedModel:
    if not config:
        raise ModelConfigError("model", "is an empty object; paste the model's config.json")
    return ResolvedModel(
        id=str(config["_name_or_path"]) if isinstance(config.get("_name_or_path"), str) else None,
        config=_freeze(config),
        weights_bytes=None,
        weights_source=None,
        source="request",
    )


def _from_directory(path: Path) -> ResolvedModel:
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise ModelFilesError(
            "model",
            f"directory {str(path)!r} has no config.json; point `model` at a downloaded model "
            "directory, a Hub id, or paste the config.json",
        )
    if cfg_path.stat().st_size > MAX_CONFIG_BYTES:
        raise ModelFilesError("model", f"{cfg_path.name} is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        config = json.loads(cfg_path.read_text("utf-8"), parse_constant=json_constant)
    except (ValueError, OSError) as exc:
        raise ModelFilesError("model", f"{str(cfg_path)!r} is not readable JSON ({exc})") from None
    if not isinstance(config, dict):
        raise ModelFilesError("model", f"{str(cfg_path)!r} is not a JSON object")
    notes: list[str] = []
    try:
        found = local_weights_bytes(path)
    except (SafetensorsError, OSError) as exc:
        found = None
        notes.append(f"Safetensors files could not be read ({exc}); weights estimated.")
    weights, detail = found if found is not None else (None, None)
    weights, served_notes = _served(config, weights)
    notes.extend(served_notes)
    return ResolvedModel(
        id=path.name,
        config=_freeze(config),
        weights_bytes=weights,
        weights_source="safetensors" if weights is not None else None,
        source="local",
        weights_detail=detail,
        notes=tuple(notes),
    )


def _from_catalog(typed: str) -> ResolvedModel | None:
    from planner.catalog import find_model, get_model

    hit = find_model(typed)
    if hit is None:
        return None
    _, alias = hit
    served = get_model(typed)  # refused entries raise here; aliases come back overridden
    weights, kind, detail = served.weights()
    return ResolvedModel(
        id=served.id,
        config=_freeze(served.config),
        weights_bytes=weights,
        weights_source=kind,
        source="catalog",
        aliases_matched=alias.id if alias is not None else None,
        weights_detail=detail,
        num_parameters=served.num_parameters,
        notes=tuple(served.notes),
    )


def _normalise_id(typed: str) -> str:
    text = typed.strip()
    for prefix in _PREFIXES:
        if text.lower().startswith(prefix):
            text = text[len(prefix) :]
            break
    # A pasted page URL: owner/name/tree/main or /blob/main/config.json.
    parts = text.strip("/").split("/")
    return (
        "/".join(parts[:2])
        if len(parts) > 2 and parts[2] in ("tree", "blob", "resolve")
        else (text.strip("/"))
    )


def _settings(given: HubSettings | None) -> HubSettings:
    if given is not None:
        return given
    from planner.resolve.settings import HubSettings

    return HubSettings()


def resolve_model(
    model: str | Mapping[str, Any],
    *,
    revision: str | None = None,
    settings: HubSettings | None = None,
    allow_local_dirs: bool | None = None,
) -> ResolvedModel:
    """Resolve a model id, local directory or pasted config into a `ResolvedModel`.

    Raises typed `FieldError`s with `loc` ("model",) or ("revision",): unknown id, gated repo
    without HF_TOKEN, offline without a cached copy, Hub access turned off.
    """
    if isinstance(model, Mapping):
        return _from_request(model)
    if not isinstance(model, str) or not model.strip():
        raise FieldError("model", "must be a model id (e.g. meta-llama/Llama-3.1-8B) or a config")
    if revision is not None and not _REVISION.match(revision):
        raise FieldError("revision", f"{revision!r} is not a branch, tag or commit name")
    typed = model.strip()
    if allow_local_dirs is None:
        allow_local_dirs = _settings(settings).allow_local_dirs
    if allow_local_dirs and ("/" in typed or typed.startswith((".", "~"))):
        path = Path(typed).expanduser()
        if path.is_dir():
            return _from_directory(path)

    if revision is None:
        hit = _from_catalog(typed)
        if hit is not None:
            return hit
    s = _settings(settings)

    repo_id = _normalise_id(typed)
    # "Did you mean", offline and before any Hub call (planner.catalog.suggest).
    near = suggest_models(typed)
    hint = f" Did you mean: {', '.join(near)}?" if near else ""
    typo = likely_typo(typed) if revision is None else None
    if typo is not None:
        raise ModelNotFoundError(
            "model",
            f"unknown model {typed!r}: not in the bundled catalog, and a misspelling of the "
            f"catalog's {typo!r} (the Hub was not asked).{hint}",
            tuple(near),
        )
    if not _REPO_ID.match(repo_id) or ".." in repo_id:
        raise ModelNotFoundError(
            "model",
            f"unknown model {typed!r}: not in the bundled catalog, and not a Hub id of the "
            "form owner/name. List bundled ids with GET /api/v1/models or `kvplan models`, or "
            f"paste the model's config.json as `model`.{hint}",
            tuple(near),
        )
    if not s.enabled:
        raise HubUnavailableError(
            "model",
            f"{typed!r} is not in the bundled catalog and Hub access is turned off "
            "(KVPLAN_HUB_ENABLED=false); paste the model's config.json as `model`, or use a "
            f"bundled id (GET /api/v1/models or `kvplan models`).{hint}",
        )

    key = (s.endpoint_url, repo_id.lower(), revision)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached

    from planner.resolve.hub import fetch

    found = fetch(repo_id, revision, s)
    weights, served_notes = _served(found.config, found.weights_bytes)
    resolved = ResolvedModel(
        id=repo_id,
        config=_freeze(found.config),
        weights_bytes=weights,
        weights_source="safetensors" if weights is not None else None,
        source="hub",
        revision=found.revision,
        weights_detail=found.weights_detail,
        notes=found.notes + served_notes,
    )
    if not s.offline:
        # Offline answers are not cached: once the network is back, the Hub's answer wins.
        _CACHE.put(key, resolved, s.cache_entries)
    return resolved


def __getattr__(name: str) -> Any:
    # HubSettings is public here but imported on first use (pydantic-settings costs start-up).
    if name == "HubSettings":
        from planner.resolve.settings import HubSettings

        return HubSettings
    raise AttributeError(name)


__all__ = [
    "GatedModelError",
    "HubSettings",
    "HubUnavailableError",
    "ModelFilesError",
    "ModelNotFoundError",
    "ResolvedModel",
    "RevisionNotFoundError",
    "cache_size",
    "clear_cache",
    "resolve_model",
]
