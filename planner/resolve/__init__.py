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
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from planner.catalog.suggest import likely_typo, suggest_models
from planner.core.config_fields import json_constant
from planner.core.errors import (
    ERROR_TEMPLATES,
    FieldError,
    FieldProblem,
    Message,
    ModelConfigError,
    did_you_mean,
)
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


def redact_url(url: str) -> str:
    from planner.resolve.settings import redact_url as redact

    return redact(url)


WeightsSource = Literal["safetensors", "parameter_count", "request"]
Source = Literal["request", "local", "catalog", "hub"]

# A Hub repo id: owner/name, letters, digits, '-', '_', '.'; 96 chars per part (Hub rules).
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}$")
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-/]{0,199}")
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


# --- in-process memory of Hub lookups --------------------------------------------------------

Key = tuple[str, str, str]  # (endpoint, repo id in lower case, revision or "main")


def _config_bytes(config: Mapping[str, Any]) -> int:
    return len(json.dumps(config, separators=(",", ":"), default=str))


class _Lru:
    """Thread-safe LRU of resolved Hub models, bounded in entries and in config bytes."""

    def __init__(self) -> None:
        self._data: OrderedDict[Key, tuple[ResolvedModel, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Key) -> ResolvedModel | None:
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return None
            self._data.move_to_end(key)
            return hit[0]

    def put(self, key: Key, value: ResolvedModel, limit: int, max_bytes: int) -> None:
        size = _config_bytes(value.config) + 512
        if limit <= 0 or size > max_bytes:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._data[key] = (value, size)
            self._bytes += size
            while len(self._data) > limit or self._bytes > max_bytes:
                _, (_, dropped) = self._data.popitem(last=False)
                self._bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._data)


class _Misses:
    """Ids the Hub does not know, or refuses for good (no config, too large), remembered for
    KVPLAN_HUB_NEGATIVE_TTL_SECONDS: a client repeating a typo costs no Hub request."""

    LIMIT = 4096

    def __init__(self) -> None:
        self._data: OrderedDict[Key, tuple[float, FieldError]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Key) -> FieldError | None:
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return None
            if hit[0] < time.monotonic():
                del self._data[key]
                return None
            return hit[1]

    def put(self, key: Key, error: FieldError, ttl_seconds: float) -> None:
        if ttl_seconds <= 0:
            return
        with self._lock:
            self._data[key] = (time.monotonic() + ttl_seconds, error)
            self._data.move_to_end(key)
            while len(self._data) > self.LIMIT:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


class _Breaker:
    """A circuit breaker per endpoint: after KVPLAN_HUB_BREAKER_FAILURES failures in a row
    (timeout, no network, 429, 5xx, a malformed answer) the Hub is not asked for
    KVPLAN_HUB_BREAKER_SECONDS (or the Hub's Retry-After, when longer); then one lookup tries."""

    def __init__(self) -> None:
        self._failures: dict[str, int] = {}
        self._open_until: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def refusal(self, endpoint: str, *, claim: bool = True) -> str | None:
        """Why the Hub is not asked now (the last failure), or None to go ahead (`claim`: this
        caller is the one trial lookup of a half-open circuit)."""
        with self._lock:
            until = self._open_until.get(endpoint)
            if until is None:
                return None
            left = until[0] - time.monotonic()
            if left <= 0:
                if not claim:
                    return None
                # Half-open: this caller tries; the others wait for its outcome or the next window.
                self._open_until[endpoint] = (time.monotonic() + 1.0, until[1])
                return None
            return f"{until[1]} (not asked again for {left:.0f} s)"

    def failed(
        self,
        endpoint: str,
        why: str,
        threshold: int,
        seconds: float,
        retry_after: float | None = None,
    ) -> None:
        with self._lock:
            n = self._failures.get(endpoint, 0) + 1
            self._failures[endpoint] = n
            if n >= threshold or retry_after is not None:
                wait = max(seconds, min(retry_after or 0.0, 3600.0))
                self._open_until[endpoint] = (time.monotonic() + wait, why)

    def succeeded(self, endpoint: str) -> None:
        with self._lock:
            self._failures.pop(endpoint, None)
            self._open_until.pop(endpoint, None)

    def clear(self) -> None:
        with self._lock:
            self._failures.clear()
            self._open_until.clear()


_CACHE = _Lru()
_MISSES = _Misses()
_BREAKER = _Breaker()


def clear_cache() -> None:
    """Forget every Hub model resolved in this process, every remembered miss and failure."""
    _CACHE.clear()
    _MISSES.clear()
    _BREAKER.clear()


def cache_size() -> int:
    return len(_CACHE)


def cache_bytes() -> int:
    return _CACHE.nbytes


# --- the steps -------------------------------------------------------------------------------


def _from_request(config: Mapping[str, Any]) -> ResolvedModel:
    if not config:
        raise ModelConfigError("model", "resolve.config_empty")
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
        raise ModelFilesError("model", "resolve.directory_without_config", path=str(path))
    if cfg_path.stat().st_size > MAX_CONFIG_BYTES:
        raise ModelFilesError(
            "model",
            "resolve.config_too_large",
            name=cfg_path.name,
            limit=MAX_CONFIG_BYTES,
        )
    try:
        config = json.loads(cfg_path.read_text("utf-8"), parse_constant=json_constant)
    except (ValueError, OSError) as exc:
        raise ModelFilesError(
            "model", "resolve.config_unreadable_json", cfg_path=str(cfg_path), exc=exc
        ) from None
    if not isinstance(config, dict):
        raise ModelFilesError("model", "resolve.config_not_object", cfg_path=str(cfg_path))
    notes: list[str] = []
    try:
        found = local_weights_bytes(path)
    except (SafetensorsError, OSError) as exc:
        found = None
        notes.append(f"Safetensors files could not be read ({exc}); weights estimated.")
    # As stored: the core takes a float32 checkpoint's bytes to the dtype its engine serves.
    weights, detail = found if found is not None else (None, None)
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
        raise FieldError("model", "resolve.model_not_id_or_config")
    if revision is not None:
        check_revision(revision)
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

    # "Did you mean", offline and before any Hub call (planner.catalog.suggest).
    near = suggest_models(typed)
    hint = did_you_mean(near)
    typo = likely_typo(typed) if revision is None else None
    if typo is not None:
        raise ModelNotFoundError(
            "model", "resolve.unknown_model_typo", tuple(near), typed=typed, typo=typo, hint=hint
        )
    repo_id = hub_id(typed)
    if repo_id is None:
        raise ModelNotFoundError(
            "model", "resolve.unknown_model_not_hub_id", tuple(near), typed=typed, hint=hint
        )
    if not s.enabled:
        raise HubUnavailableError("model", "resolve.hub_off", typed=typed, hint=hint)

    key = hub_key(repo_id, revision, s)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    missed = _MISSES.get(key)
    if missed is not None:
        raise _hinted(missed, near)
    if not s.offline:
        down = _BREAKER.refusal(s.endpoint_url)
        if down is not None:
            raise HubUnavailableError(
                "model",
                "resolve.hub_circuit_open",
                where=redact_url(s.endpoint_url),
                down=down,
                hint=hint,
            )

    from planner.resolve.hub import fetch
    from planner.resolve.transport import HubRefused

    try:
        found = fetch(repo_id, revision, s)
    except HubUnavailableError as exc:
        cause = exc.__cause__ or exc.__context__
        retry = cause.retry_after_seconds if isinstance(cause, HubRefused) else None
        if not s.offline and "cannot be written" not in exc.detail:
            _BREAKER.failed(
                s.endpoint_url,
                exc.detail.split(";")[0],
                s.breaker_failures,
                s.breaker_seconds,
                retry,
            )
        raise _hinted(exc, near) from cause
    except (ModelNotFoundError, RevisionNotFoundError, ModelFilesError, GatedModelError) as exc:
        if not s.offline:
            _BREAKER.succeeded(s.endpoint_url)
            if not isinstance(exc, GatedModelError):  # access depends on the token sent
                _MISSES.put(key, exc, s.negative_ttl_seconds)
        raise _hinted(exc, near) from exc.__cause__
    if not s.offline:
        _BREAKER.succeeded(s.endpoint_url)
    weights = found.weights_bytes  # as stored (see _from_directory)
    resolved = ResolvedModel(
        id=repo_id,
        config=_freeze(found.config),
        weights_bytes=weights,
        weights_source="safetensors" if weights is not None else None,
        source="hub",
        revision=found.revision,
        weights_detail=found.weights_detail,
        notes=found.notes,
    )
    if not s.offline:
        # Offline answers are not cached: once the network is back, the Hub's answer wins.
        _CACHE.put(key, resolved, s.cache_entries, s.memory_cache_bytes)
    return resolved


def _hinted(exc: FieldError, near: list[str]) -> FieldError:
    """A Hub failure for an id close to catalog ids, with the "did you mean" that a catalog miss
    gets (planner.catalog.suggest), so every surface offers it: the CLI and API in the message,
    the page from `suggestions`."""
    if not near or getattr(exc, "suggestions", None):
        return exc
    problem = exc.problems[0] if exc.problems else exc.whole()
    hint = did_you_mean(near)
    if "{hint}" in ERROR_TEMPLATES.get(problem.code, ""):
        if problem.params.get("hint"):
            return exc  # already says it
        message = Message(problem.code, {**problem.params, "hint": hint})
    else:
        message = Message.of("resolve.with_hint", reason=problem.message, hint=hint)
    hinted = FieldProblem.from_message(("model",), message)
    if isinstance(exc, ModelNotFoundError):
        found = ModelNotFoundError.at("model", hinted)
        found.suggestions = tuple(near)  # type: ignore[attr-defined]
        return found
    if isinstance(exc, HubUnavailableError):
        out = HubUnavailableError.at("model", hinted)
        out.suggestions = tuple(near)  # type: ignore[attr-defined]  # the page reads it
        return out
    return exc


def check_revision(revision: str) -> None:
    """A branch, tag or commit name, never a path: no `..`, `.` or empty parts, no control
    characters, nothing absolute (the client names cache files after the revision)."""
    parts = revision.split("/")
    if (
        not _REVISION.fullmatch(revision)
        or any(part in ("", ".", "..") for part in parts)
        or revision.endswith((".lock", "."))
    ):
        raise FieldError("revision", "resolve.revision_invalid", revision=revision[:120])


def hub_id(typed: str) -> str | None:
    """The canonical Hub repo id of what was typed (page URLs and prefixes removed), or None
    when it cannot be one."""
    repo_id = _normalise_id(typed)
    if not _REPO_ID.match(repo_id) or ".." in repo_id:
        return None
    return repo_id


def hub_key(repo_id: str, revision: str | None, s: HubSettings) -> Key:
    """One key per repo and revision, however the id was typed."""
    return (s.endpoint_url, repo_id.lower(), revision or "main")


def hub_state(
    typed: str, revision: str | None, s: HubSettings
) -> ResolvedModel | FieldError | None:
    """What this process already knows about a Hub id without asking the Hub: the model, a
    remembered refusal (an unknown id, an open circuit), or None."""
    repo_id = hub_id(typed)
    if repo_id is None:
        return None
    key = hub_key(repo_id, revision, s)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    missed = _MISSES.get(key)
    if missed is not None:
        return missed
    down = _BREAKER.refusal(s.endpoint_url, claim=False) if not s.offline else None
    if down is not None:
        return HubUnavailableError(
            "model",
            "resolve.hub_circuit_open",
            where=redact_url(s.endpoint_url),
            down=down,
            hint="",
        )
    return None


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
    "Key",
    "ModelFilesError",
    "ModelNotFoundError",
    "ResolvedModel",
    "RevisionNotFoundError",
    "cache_bytes",
    "cache_size",
    "check_revision",
    "clear_cache",
    "hub_id",
    "hub_key",
    "hub_state",
    "resolve_model",
]
