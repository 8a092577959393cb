"""Reading a model from the Hugging Face Hub with the `huggingface_hub` client.

Requests, in order: model info (one bounded GET: the commit, the file list, gating), then
config.json and, when the repo is sharded, model.safetensors.index.json through the client's
cache (`hf_hub_download`), else the single model.safetensors header by range requests. Offline
(HF_HUB_OFFLINE), only the cache is read. Every client error becomes a typed FieldError that
says what to do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub import errors as hf_errors

from planner.core.config_fields import json_constant
from planner.resolve.errors import (
    GatedModelError,
    HubUnavailableError,
    ModelFilesError,
    ModelNotFoundError,
    RevisionNotFoundError,
)
from planner.resolve.safetensors_files import INDEX_NAME, SINGLE_NAME, index_total_size
from planner.resolve.settings import HubSettings

T = TypeVar("T")
# The client's HTTP stack (httpx in huggingface_hub 1.x, httpx2 in 2.x): its errors are network
# errors, whichever version is installed.
_TRANSPORT_MODULES = frozenset({"httpx", "httpx2", "httpcore", "httpcore2", "h11"})

PASTE_HINT = "paste the model's config.json as `model` (a JSON object) instead"
# An index lists every tensor; DeepSeek-V3's is ~9 MB. Anything far larger is not an index.
MAX_INDEX_BYTES = 64 << 20
MAX_CONFIG_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class HubModel:
    repo_id: str
    revision: str | None  # the commit the files came from, when known
    config: dict[str, Any]
    weights_bytes: int | None
    weights_detail: str | None
    notes: tuple[str, ...]


def _field_for(exc: Exception) -> str:
    return "revision" if isinstance(exc, hf_errors.RevisionNotFoundError) else "model"


def _translate(exc: Exception, repo_id: str, revision: str | None, s: HubSettings) -> Exception:
    """A client exception as the FieldError a user can act on."""
    where = s.endpoint_url
    if isinstance(exc, hf_errors.GatedRepoError):
        has_token = s.token is not None
        return GatedModelError(
            "model",
            f"{repo_id!r} is gated on {where}: "
            + (
                "the token in HF_TOKEN has no access; accept the licence on the model page "
                "with that account"
                if has_token
                else "set HF_TOKEN to a Hugging Face token whose account accepted its licence"
            )
            + f", or {PASTE_HINT}.",
        )
    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return RevisionNotFoundError(
            "revision",
            f"{repo_id!r} has no revision {revision!r} on {where}; use a branch, tag or commit "
            "that exists, or leave revision unset for main.",
        )
    if isinstance(exc, hf_errors.RepositoryNotFoundError):
        return ModelNotFoundError(
            "model",
            f"unknown model {repo_id!r}: not in the bundled catalog and no such repo on {where}. "
            "Check the spelling in `model` (list bundled ids with GET /api/v1/models or "
            "`kvplan models`); for a private repo set HF_TOKEN; or " + PASTE_HINT + ".",
        )
    if isinstance(exc, hf_errors.RemoteEntryNotFoundError):
        return ModelFilesError(
            "model",
            f"{repo_id!r} on {where} has no config.json (not a transformers model repo); "
            + PASTE_HINT
            + ".",
        )
    if isinstance(exc, (hf_errors.OfflineModeIsEnabled, hf_errors.LocalEntryNotFoundError)):
        return HubUnavailableError(
            "model",
            f"{repo_id!r} is not in the bundled catalog and not in the Hugging Face cache, and "
            "the Hub cannot be asked (HF_HUB_OFFLINE is set or the network is unreachable); "
            + PASTE_HINT
            + ", or run once with network access to fill the cache.",
        )
    if isinstance(exc, hf_errors.HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else None
        if status == 401:
            return GatedModelError(
                "model",
                f"{where} rejected the token in HF_TOKEN (401); set a valid token, unset it for "
                f"public repos, or {PASTE_HINT}.",
            )
        return HubUnavailableError(
            "model",
            f"the Hub at {where} answered {status or 'an error'} for {repo_id!r}; try again "
            f"later, or {PASTE_HINT}.",
        )
    if isinstance(exc, TimeoutError) or (_is_transport(exc) and "Timeout" in type(exc).__name__):
        return HubUnavailableError(
            "model",
            f"the Hub at {where} did not answer within {s.timeout_seconds:g} s for {repo_id!r} "
            f"(KVPLAN_HUB_TIMEOUT_SECONDS); {PASTE_HINT}.",
        )
    if isinstance(exc, (ConnectionError, OSError)) or _is_transport(exc):
        return HubUnavailableError(
            "model",
            f"no network path to the Hub at {where} ({type(exc).__name__}) for {repo_id!r}; "
            f"set HF_ENDPOINT to a reachable mirror, or {PASTE_HINT}.",
        )
    return exc


def _is_transport(exc: Exception) -> bool:
    """A network error of the client's HTTP library (connect, read, timeout, protocol)."""
    return type(exc).__module__.split(".")[0] in _TRANSPORT_MODULES


def _call(fn: Callable[[], T], repo_id: str, revision: str | None, s: HubSettings) -> T:
    try:
        return fn()
    except (hf_errors.HfHubHTTPError, hf_errors.LocalEntryNotFoundError, OSError) as exc:
        raise _translate(exc, repo_id, revision, s) from None
    except Exception as exc:
        if _is_transport(exc):
            raise _translate(exc, repo_id, revision, s) from None
        raise


def _read_json(path: str, limit: int, what: str, repo_id: str) -> Any:
    p = Path(path)
    if p.stat().st_size > limit:
        raise ModelFilesError("model", f"{repo_id!r}: {what} is larger than {limit} bytes")
    try:
        return json.loads(p.read_text("utf-8"), parse_constant=json_constant)
    except ValueError as exc:
        raise ModelFilesError("model", f"{repo_id!r}: {what} is not JSON ({exc})") from None


def fetch(repo_id: str, revision: str | None, s: HubSettings) -> HubModel:
    token = s.token_value()
    endpoint = s.endpoint_url
    cache = str(s.cache_dir)
    notes: list[str] = []

    def download(name: str, rev: str | None, offline: bool) -> str:
        return hf_hub_download(
            repo_id,
            name,
            revision=rev,
            cache_dir=cache,
            token=token,
            endpoint=endpoint,
            local_files_only=offline,
            etag_timeout=s.timeout_seconds,
        )

    if s.offline:
        cfg_path = _call(lambda: download("config.json", revision, True), repo_id, revision, s)
        config = _read_json(cfg_path, MAX_CONFIG_BYTES, "config.json", repo_id)
        weights: int | None = None
        detail: str | None = None
        try:
            index_path = download(INDEX_NAME, revision, True)
        except (hf_errors.LocalEntryNotFoundError, hf_errors.EntryNotFoundError, OSError):
            notes.append(
                "Offline: no cached safetensors index, so the weights are estimated from the "
                "config."
            )
        else:
            weights = index_total_size(_read_json(index_path, MAX_INDEX_BYTES, INDEX_NAME, repo_id))
            detail = f"{INDEX_NAME} metadata.total_size (cached)" if weights else None
        if not isinstance(config, dict):
            raise ModelFilesError("model", f"{repo_id!r}: config.json is not a JSON object")
        return HubModel(repo_id, revision, config, weights, detail, tuple(notes))

    api = HfApi(endpoint=endpoint, token=token)
    # One bounded request first: it fails fast (no client retries) when the Hub is unreachable,
    # and gives the commit and the file list, so later requests ask only for files that exist.
    info = _call(
        lambda: api.model_info(repo_id, revision=revision, timeout=s.timeout_seconds),
        repo_id,
        revision,
        s,
    )
    commit = info.sha or revision
    files = {sib.rfilename for sib in info.siblings or []}
    if files and "config.json" not in files:
        raise ModelFilesError(
            "model",
            f"{repo_id!r} on {endpoint} has no config.json (not a transformers model repo); "
            + PASTE_HINT
            + ".",
        )
    # Downloads ask for the revision as given (main when unset) so the client records the ref
    # in its cache and an offline run later finds the files under the same name.
    cfg_path = _call(lambda: download("config.json", revision, False), repo_id, revision, s)
    config = _read_json(cfg_path, MAX_CONFIG_BYTES, "config.json", repo_id)
    if not isinstance(config, dict):
        raise ModelFilesError("model", f"{repo_id!r}: config.json is not a JSON object")

    weights = None
    detail = None
    if INDEX_NAME in files:
        index_path = _call(lambda: download(INDEX_NAME, revision, False), repo_id, revision, s)
        weights = index_total_size(_read_json(index_path, MAX_INDEX_BYTES, INDEX_NAME, repo_id))
        detail = f"{INDEX_NAME} metadata.total_size" if weights else None
    if weights is None and SINGLE_NAME in files:
        try:
            meta = _call(
                lambda: api.parse_safetensors_file_metadata(
                    repo_id, SINGLE_NAME, revision=commit, timeout=s.timeout_seconds
                ),
                repo_id,
                revision,
                s,
            )
        except hf_errors.SafetensorsParsingError as exc:
            notes.append(f"{SINGLE_NAME} has an unreadable header ({exc}); weights estimated.")
        else:
            weights = sum(t.data_offsets[1] - t.data_offsets[0] for t in meta.tensors.values())
            detail = f"{SINGLE_NAME} header (HTTP range request)"
    if weights is None:
        notes.append(
            "The repo publishes no safetensors index or single safetensors file, so the "
            "weights are estimated from the config."
        )
    return HubModel(repo_id, commit, config, weights or None, detail, tuple(notes))
