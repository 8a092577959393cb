"""Reading a model from the Hugging Face Hub with the `huggingface_hub` client.

Requests, in order: model info (one bounded GET: the commit, the file list, gating), then
config.json (and a ModelOpt hf_quant_config.json where config.json has no quantization_config)
and, when the repo is sharded, model.safetensors.index.json through the client's
cache (`hf_hub_download`), else the single model.safetensors header by range requests. Offline
(HF_HUB_OFFLINE), only the cache is read. Every client error becomes a typed FieldError that
says what to do.
"""

from __future__ import annotations

import errno
import json
import mmap
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub import errors as hf_errors

from planner.core.config_fields import json_constant
from planner.core.errors import Message
from planner.core.modelopt import FILE_NAME as QUANT_NAME
from planner.core.modelopt import with_hf_quant_config
from planner.resolve.errors import (
    GatedModelError,
    HubUnavailableError,
    ModelFilesError,
    ModelNotFoundError,
    RevisionNotFoundError,
)
from planner.resolve.safetensors_files import INDEX_NAME, SINGLE_NAME, index_total_size
from planner.resolve.settings import HubSettings, redact_url
from planner.resolve.transport import HubRefused, file_cap, lookup_budget

T = TypeVar("T")
# The client's HTTP stack (httpx in huggingface_hub 1.x, httpx2 in 2.x): its errors are network
# errors, whichever version is installed.
_TRANSPORT_MODULES = frozenset({"httpx", "httpx2", "httpcore", "httpcore2", "h11"})

PASTE_HINT = "paste the model's config.json as `model` (a JSON object) instead"
# An index lists every tensor; DeepSeek-V3's is ~9 MB. Anything far larger is not an index.
MAX_INDEX_BYTES = 64 << 20
MAX_CONFIG_BYTES = 4 << 20
# Model info lists every file of the repo; the largest real repos' answers are a few MB.
MAX_INFO_BYTES = 16 << 20
# Filesystem errors that mean "the cache cannot be written", not "the network is down".
_CACHE_ERRNOS = frozenset(
    {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR}
)


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
    where = redact_url(s.endpoint_url)
    if isinstance(exc, HubRefused):
        return _refusal(exc, repo_id, where, s)
    if (
        isinstance(exc, OSError)
        and not isinstance(exc, ConnectionError)
        and (exc.errno in _CACHE_ERRNOS or exc.filename is not None)
    ):
        return HubUnavailableError(
            "model",
            "resolve.cache_not_writable",
            cache_dir=str(s.cache_dir),
            reason=exc.strerror or type(exc).__name__,
            repo_id=repo_id,
        )
    if isinstance(exc, hf_errors.GatedRepoError):
        has_token = s.token_for(repo_id) is not None
        return GatedModelError(
            "model",
            "resolve.gated_token_no_access"
            if has_token
            else "resolve.gated_token_not_used"
            if s.token is not None
            else "resolve.gated_no_token",
            repo_id=repo_id,
            where=where,
        )
    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return RevisionNotFoundError(
            "revision",
            "resolve.no_such_revision",
            repo_id=repo_id,
            revision=revision,
            where=where,
        )
    if isinstance(exc, hf_errors.RepositoryNotFoundError):
        return ModelNotFoundError("model", "resolve.no_such_repo", repo_id=repo_id, where=where)
    if isinstance(exc, hf_errors.RemoteEntryNotFoundError):
        return ModelFilesError("model", "resolve.repo_without_config", repo_id=repo_id, where=where)
    if isinstance(exc, (hf_errors.OfflineModeIsEnabled, hf_errors.LocalEntryNotFoundError)):
        return HubUnavailableError("model", "resolve.offline_not_cached", repo_id=repo_id)
    if isinstance(exc, hf_errors.HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else None
        if status == 401:
            return GatedModelError("model", "resolve.token_rejected", where=where)
        return HubUnavailableError(
            "model",
            "resolve.hub_error_status",
            where=where,
            status=status or "an error",
            repo_id=repo_id,
        )
    if isinstance(exc, TimeoutError) or (_is_transport(exc) and "Timeout" in type(exc).__name__):
        return HubUnavailableError(
            "model",
            "resolve.hub_timeout",
            where=where,
            seconds=s.timeout_seconds,
            repo_id=repo_id,
        )
    if isinstance(exc, (ConnectionError, OSError)) or _is_transport(exc):
        return HubUnavailableError(
            "model",
            "resolve.hub_unreachable",
            where=where,
            error=type(exc).__name__,
            repo_id=repo_id,
        )
    return exc


def _refusal(exc: HubRefused, repo_id: str, where: str, s: HubSettings) -> Exception:
    if exc.kind == "too_large":
        return ModelFilesError(
            "model",
            "resolve.file_offered_too_large",
            repo_id=repo_id,
            where=where,
            detail=exc.detail,
        )
    if exc.kind == "deadline":
        return HubUnavailableError(
            "model",
            "resolve.hub_deadline",
            where=where,
            seconds=s.timeout_seconds,
            repo_id=repo_id,
        )
    if exc.kind == "busy":
        later = (
            Message.of("resolve.retry_after", seconds=exc.retry_after_seconds)
            if exc.retry_after_seconds is not None
            else Message.of("resolve.try_again_later")
        )
        return HubUnavailableError(
            "model",
            "resolve.hub_busy",
            where=where,
            detail=exc.detail,
            repo_id=repo_id,
            later=later,
        )
    if exc.kind == "network":
        return HubUnavailableError(
            "model",
            "resolve.hub_transport_error",
            detail=exc.detail,
            where=where,
            repo_id=repo_id,
        )
    return HubUnavailableError(
        "model", "resolve.hub_not_protocol", where=where, detail=exc.detail, repo_id=repo_id
    )


def _is_transport(exc: Exception) -> bool:
    """A network error of the client's HTTP library (connect, read, timeout, protocol)."""
    return type(exc).__module__.split(".")[0] in _TRANSPORT_MODULES


def _call(fn: Callable[[], T], repo_id: str, revision: str | None, s: HubSettings) -> T:
    try:
        return fn()
    except (
        HubRefused,
        hf_errors.HfHubHTTPError,
        hf_errors.LocalEntryNotFoundError,
        OSError,
    ) as exc:
        raise _translate(exc, repo_id, revision, s) from None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        # The client parses the Hub's answers: one that is not JSON, or has wrong types.
        raise _translate(
            HubRefused("malformed", f"an unreadable answer ({type(exc).__name__})"),
            repo_id,
            revision,
            s,
        ) from None
    except Exception as exc:
        if _is_transport(exc):
            raise _translate(exc, repo_id, revision, s) from None
        raise


def _forget(path: Path) -> None:
    """Delete a cached file that was refused: the snapshot link and the blob it points to."""
    try:
        blob = path.resolve()
        path.unlink(missing_ok=True)
        if blob != path and "blobs" in blob.parts:
            blob.unlink(missing_ok=True)
    except OSError:
        pass


def _read_json(path: str, limit: int, what: str, repo_id: str) -> Any:
    p = Path(path)
    if p.stat().st_size > limit:
        _forget(p)
        raise ModelFilesError(
            "model", "resolve.file_too_large", repo_id=repo_id, what=what, limit=limit
        )
    try:
        return json.loads(p.read_bytes(), parse_constant=json_constant)
    except ValueError as exc:
        _forget(p)
        raise ModelFilesError(
            "model", "resolve.file_not_json", repo_id=repo_id, what=what, exc=exc
        ) from None


_METADATA_KEY = re.compile(rb'"metadata"\s*:\s*')
# The metadata object is a few keys; more than this after its key is not an index's.
_METADATA_WINDOW_BYTES = 64 << 10


def _index_total(path: str, repo_id: str) -> int | None:
    """`metadata.total_size` of an index without loading it: the file is mapped, not read, and
    only the metadata object is parsed (a large MoE's weight map is tens of MB of JSON and
    hundreds of MB as Python objects)."""
    p = Path(path)
    size = p.stat().st_size
    if size > MAX_INDEX_BYTES:
        _forget(p)
        raise ModelFilesError(
            "model",
            "resolve.index_too_large",
            repo_id=repo_id,
            name=INDEX_NAME,
            limit=MAX_INDEX_BYTES,
        )
    if size == 0:
        _forget(p)
        raise ModelFilesError("model", "resolve.index_empty", repo_id=repo_id, name=INDEX_NAME)
    decoder = json.JSONDecoder()
    with p.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if not data[:4096].lstrip().startswith(b"{"):
            _forget(p)
            raise ModelFilesError(
                "model", "resolve.index_not_object", repo_id=repo_id, name=INDEX_NAME
            )
        for m in _METADATA_KEY.finditer(data):
            window = data[m.end() : m.end() + _METADATA_WINDOW_BYTES].decode("utf-8", "replace")
            try:
                value, _ = decoder.raw_decode(window)
            except ValueError:
                continue
            if isinstance(value, dict):
                return index_total_size({"metadata": value})
    return None


_COMMIT = re.compile(r"[0-9a-f]{40}")


def _trim_cache(s: HubSettings) -> None:
    """Keep the Hub cache under KVPLAN_HUB_CACHE_BYTES: least recently used revisions go."""
    from huggingface_hub import scan_cache_dir

    try:
        info = scan_cache_dir(s.cache_dir)
    except Exception:  # an unreadable cache is reported by the next download, not here
        return
    excess = info.size_on_disk - s.cache_bytes
    if excess <= 0:
        return
    revisions = sorted(
        (rev for repo in info.repos for rev in repo.revisions), key=lambda r: r.last_modified
    )
    chosen: list[str] = []
    for rev in revisions:
        if excess <= 0:
            break
        chosen.append(rev.commit_hash)
        excess -= rev.size_on_disk
    if chosen:
        info.delete_revisions(*chosen).execute()


def _drop_partial(s: HubSettings, repo_id: str) -> None:
    """Remove what an interrupted or refused download left in this repo's cache folder."""
    folder = s.cache_dir / ("models--" + repo_id.replace("/", "--")) / "blobs"
    try:
        for partial in folder.glob("*.incomplete"):
            partial.unlink(missing_ok=True)
    except OSError:
        pass


def fetch(repo_id: str, revision: str | None, s: HubSettings) -> HubModel:
    """The repo's config and weight bytes; every request of it bounded by one deadline
    (KVPLAN_HUB_TIMEOUT_SECONDS) and by the transport's checks (planner.resolve.transport)."""
    if s.offline:
        return _fetch(repo_id, revision, s)
    try:
        with lookup_budget(s.timeout_seconds, s.endpoint_url, MAX_INFO_BYTES):
            found = _fetch(repo_id, revision, s)
    except BaseException:
        _drop_partial(s, repo_id)
        raise
    _trim_cache(s)  # after what this lookup downloaded
    return found


def _fetch(repo_id: str, revision: str | None, s: HubSettings) -> HubModel:
    token = s.token_for(repo_id)
    endpoint = s.endpoint_url
    cache = str(s.cache_dir)
    notes: list[str] = []

    def download(name: str, rev: str | None, offline: bool) -> str:
        with file_cap(MAX_INDEX_BYTES if name == INDEX_NAME else MAX_CONFIG_BYTES):
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
            weights = _index_total(index_path, repo_id)
            detail = f"{INDEX_NAME} metadata.total_size (cached)" if weights else None
        if not isinstance(config, dict):
            raise ModelFilesError("model", "resolve.repo_config_not_object", repo_id=repo_id)
        if "quantization_config" not in config:
            try:
                quant_path = download(QUANT_NAME, revision, True)
            except (hf_errors.LocalEntryNotFoundError, hf_errors.EntryNotFoundError, OSError):
                pass
            else:
                quant = _read_json(quant_path, MAX_CONFIG_BYTES, QUANT_NAME, repo_id)
                config = with_hf_quant_config(config, quant)
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
    sha = info.sha
    if sha is not None and not (isinstance(sha, str) and _COMMIT.fullmatch(sha)):
        raise _translate(
            HubRefused("malformed", f"a commit of {str(sha)[:60]!r}"), repo_id, revision, s
        )
    commit = sha or revision
    siblings = info.siblings if isinstance(info.siblings, list) else []
    files = {sib.rfilename for sib in siblings if isinstance(getattr(sib, "rfilename", None), str)}
    if files and "config.json" not in files:
        raise ModelFilesError(
            "model", "resolve.repo_without_config", repo_id=repo_id, where=redact_url(endpoint)
        )
    # Downloads ask for the revision as given (main when unset) so the client records the ref
    # in its cache and an offline run later finds the files under the same name.
    cfg_path = _call(lambda: download("config.json", revision, False), repo_id, revision, s)
    config = _read_json(cfg_path, MAX_CONFIG_BYTES, "config.json", repo_id)
    if not isinstance(config, dict):
        _forget(Path(cfg_path))
        raise ModelFilesError("model", "resolve.repo_config_not_object", repo_id=repo_id)

    # ModelOpt ≤ 0.29 checkpoints keep their quantization in hf_quant_config.json, read (as
    # vLLM reads it) only where config.json has no quantization_config (planner.core.modelopt).
    if QUANT_NAME in files and "quantization_config" not in config:
        quant_path = _call(lambda: download(QUANT_NAME, revision, False), repo_id, revision, s)
        quant = _read_json(quant_path, MAX_CONFIG_BYTES, QUANT_NAME, repo_id)
        config = with_hf_quant_config(config, quant)

    weights = None
    detail = None
    if INDEX_NAME in files:
        index_path = _call(lambda: download(INDEX_NAME, revision, False), repo_id, revision, s)
        weights = _index_total(index_path, repo_id)
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
            try:
                weights = sum(t.data_offsets[1] - t.data_offsets[0] for t in meta.tensors.values())
            except (TypeError, ValueError, IndexError, AttributeError):
                notes.append(f"{SINGLE_NAME} has a malformed header; weights estimated.")
            else:
                detail = f"{SINGLE_NAME} header (HTTP range request)"
            if not isinstance(weights, int) or weights < 0:
                weights, detail = None, None
    if weights is None:
        notes.append(
            "The repo publishes no safetensors index or single safetensors file, so the "
            "weights are estimated from the config."
        )
    return HubModel(repo_id, commit, config, weights or None, detail, tuple(notes))
