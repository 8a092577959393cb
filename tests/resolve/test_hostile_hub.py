"""A slow, hostile or absent Hub: every lookup ends by its deadline, with a 4xx naming `model`
or `revision`, and nothing is written outside the cache (issue 23).

The loopback Hub (tests/resolve/hub_server.py) answers as an attacker's would: dripping a byte
every 0.3 s, stalling, rate limiting, announcing 256 MiB files, sending malformed answers and
redirecting to another port. The real `huggingface_hub` client talks to it.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from planner.core.errors import FieldError
from planner.resolve import (
    GatedModelError,
    HubUnavailableError,
    ModelFilesError,
    ModelNotFoundError,
    cache_bytes,
    cache_size,
    resolve_model,
)
from planner.resolve.hub import _index_total
from tests.resolve.conftest import SHARDED_CONFIG, settings
from tests.resolve.hub_server import GOOD_TOKEN, HubState, Repo, black_hole, hub_server

Hub = tuple[str, HubState]
# The lookup's deadline in these tests, and the slack allowed for the process around it.
DEADLINE_S = 1.0
SLACK_S = 1.0


def _files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def _du(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def _timed(fn: object, *args: object, **kwargs: object) -> tuple[float, BaseException | None]:
    start = time.monotonic()
    try:
        fn(*args, **kwargs)  # type: ignore[operator]
    except BaseException as exc:
        return time.monotonic() - start, exc
    return time.monotonic() - start, None


# ---- 1. one total deadline, no retries, a circuit breaker ------------------------------------


@pytest.mark.parametrize("mode", ["drip", "stall"])
def test_a_dripping_or_stalled_hub_ends_at_the_lookup_deadline(
    hub: Hub, tmp_path: Path, mode: str
) -> None:
    url, state = hub
    state.mode = mode
    s = settings(url, tmp_path, timeout_seconds=DEADLINE_S)
    took, exc = _timed(resolve_model, "acme/sharded-llama", settings=s)
    assert isinstance(exc, HubUnavailableError), exc
    assert took < DEADLINE_S + SLACK_S, took
    assert "KVPLAN_HUB_TIMEOUT_SECONDS" in exc.detail
    assert exc.problems[0].loc == ("model",)


def test_an_unreachable_hub_ends_at_the_lookup_deadline(tmp_path: Path) -> None:
    with black_hole() as url:
        s = settings(url, tmp_path, timeout_seconds=DEADLINE_S)
        took, exc = _timed(resolve_model, "acme/typo-one", settings=s)
    assert isinstance(exc, HubUnavailableError), exc
    assert took < DEADLINE_S + SLACK_S, took


@pytest.mark.parametrize("mode", ["429", "503"])
def test_rate_limits_are_not_slept_on_and_open_the_circuit(
    hub: Hub, tmp_path: Path, mode: str
) -> None:
    url, state = hub
    state.mode = mode
    s = settings(url, tmp_path, timeout_seconds=5)
    took, exc = _timed(resolve_model, "acme/sharded-llama", settings=s)
    assert isinstance(exc, HubUnavailableError), exc
    assert took < 1.0, took  # the client's own backoff would sleep 26 s here
    assert mode in exc.detail and "retry after 25 s" in exc.detail
    assert "offline" not in exc.detail.lower()  # the real cause, not offline mode
    asked = len(state.requests)
    assert asked == 1
    # Retry-After opened the circuit: another id fails at once, without a request.
    took, exc = _timed(resolve_model, "acme/single-file", settings=s)
    assert isinstance(exc, HubUnavailableError) and took < 0.2
    assert "not asked again" in exc.detail
    assert len(state.requests) == asked


def test_the_circuit_opens_after_failures_in_a_row_and_closes_after_a_success(
    hub: Hub, tmp_path: Path
) -> None:
    url, state = hub
    state.mode = "stall"
    s = settings(url, tmp_path, timeout_seconds=0.3, breaker_failures=2, breaker_seconds=1)
    for typo in ("acme/a", "acme/b"):
        with pytest.raises(HubUnavailableError):
            resolve_model(typo, settings=s)
    asked = len(state.requests)
    took, exc = _timed(resolve_model, "acme/c", settings=s)
    assert isinstance(exc, HubUnavailableError) and took < 0.1
    assert len(state.requests) == asked
    state.mode = None
    time.sleep(1.05)
    assert resolve_model("acme/sharded-llama", settings=s).source == "hub"  # half-open trial
    assert resolve_model("acme/single-file", settings=s).source == "hub"  # closed again


def test_unknown_ids_are_remembered(hub: Hub, tmp_path: Path) -> None:
    url, state = hub
    s = settings(url, tmp_path)
    with pytest.raises(ModelNotFoundError):
        resolve_model("acme/does-not-exist", settings=s)
    asked = len(state.requests)
    for typed in ("acme/does-not-exist", "ACME/Does-Not-Exist", "hf://acme/does-not-exist"):
        with pytest.raises(ModelNotFoundError):
            resolve_model(typed, settings=s)
    assert len(state.requests) == asked


# ---- 3, 4. memory and disk bounds, one key per repo -----------------------------------------


def test_typed_variants_share_one_cache_entry(hub: Hub, tmp_path: Path) -> None:
    url, state = hub
    s = settings(url, tmp_path)
    for typed in (
        "acme/sharded-llama",
        "ACME/Sharded-Llama",
        "https://huggingface.co/acme/sharded-llama/tree/main/x",
        "hf://acme/sharded-llama",
    ):
        resolve_model(typed, settings=s)
    assert cache_size() == 1
    assert len([q for q in state.requests if q.path.startswith("/api/models/")]) == 1


def test_the_in_process_cache_is_bounded_in_bytes(hub: Hub, tmp_path: Path) -> None:
    url, state = hub
    wide = {**SHARDED_CONFIG, "id2label": {str(i): "x" * 20 for i in range(20_000)}}
    raw = json.dumps(wide).encode()  # ~0.6 MB
    for i in range(6):
        state.add(f"wide/m{i}", Repo({"config.json": raw}))
    limit = 2 * len(raw)
    s = settings(url, tmp_path, memory_cache_bytes=limit)
    for i in range(6):
        resolve_model(f"wide/m{i}", settings=s)
        assert cache_bytes() <= limit
    assert cache_size() <= 2


@pytest.mark.parametrize("mode", ["huge", "huge_chunked"])
def test_a_huge_config_is_refused_before_it_fills_the_disk(
    hub: Hub, tmp_path: Path, mode: str
) -> None:
    url, state = hub
    state.modes["acme/sharded-llama"] = mode
    s = settings(url, tmp_path, timeout_seconds=10)
    took, exc = _timed(resolve_model, "acme/sharded-llama", settings=s)
    assert isinstance(exc, ModelFilesError), exc
    assert took < 5.0, took
    assert exc.problems[0].loc == ("model",)
    assert _du(tmp_path) < 5 << 20  # at most the 4 MiB cap streamed, and deleted
    assert not list(tmp_path.rglob("*.incomplete"))


def test_the_disk_cache_is_capped(hub: Hub, tmp_path: Path) -> None:
    url, state = hub
    big = json.dumps({**SHARDED_CONFIG, "pad": "x" * 700_000}).encode()
    for i in range(4):
        state.add(f"pad/m{i}", Repo({"config.json": big}))
    s = settings(url, tmp_path, cache_bytes=1 << 20)
    for i in range(4):
        resolve_model(f"pad/m{i}", settings=s)
        assert _du(tmp_path) <= 1 << 20


def test_an_index_is_read_without_building_its_weight_map(tmp_path: Path) -> None:
    weight_map = {
        f"model.layers.{i}.mlp.experts.{j}.w": "model-1.safetensors"
        for i in range(100)
        for j in range(2000)
    }
    path = tmp_path / "index.json"
    path.write_text(json.dumps({"metadata": {"total_size": 123}, "weight_map": weight_map}))
    size = path.stat().st_size
    tracemalloc.start()
    try:
        assert _index_total(str(path), "acme/x") == 123
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # json.loads builds ~10x the file in objects; the file is mapped, and only the metadata
    # object after its key is decoded.
    assert peak < size // 4, (peak, size)


# ---- 7. revisions are names, never paths ----------------------------------------------------


@pytest.mark.parametrize(
    "revision",
    [
        "main/../../../../tmp/x",
        "..",
        "main\n",
        "main\x00",
        "/etc",
        "a//b",
        "main/",
        "./main",
        "x.lock",
    ],
)
def test_revision_paths_are_refused(hub: Hub, tmp_path: Path, revision: str) -> None:
    url, state = hub
    with pytest.raises(FieldError) as exc:
        resolve_model("acme/sharded-llama", revision=revision, settings=settings(url, tmp_path))
    assert exc.value.problems[0].loc == ("revision",)
    assert state.requests == []


def test_tags_with_dots_are_revisions(hub: Hub, tmp_path: Path) -> None:
    url, state = hub
    state.repos["acme/sharded-llama"].revisions.add("v1.0-rc.2")
    r = resolve_model("acme/sharded-llama", revision="v1.0-rc.2", settings=settings(url, tmp_path))
    assert r.source == "hub"


# ---- 8. credentials in HF_ENDPOINT never reach an answer ------------------------------------


def test_endpoint_credentials_are_redacted(tmp_path: Path) -> None:
    with black_hole() as url:
        secret = url.replace("http://", "http://admin:s3cr3t-pw@")
        with pytest.raises(HubUnavailableError) as exc:
            resolve_model("acme/x", settings=settings(secret, tmp_path, timeout_seconds=0.3))
    assert "s3cr3t-pw" not in exc.value.detail and "admin" not in exc.value.detail
    assert "***@127.0.0.1" in exc.value.detail


# ---- 10. malformed answers, hostile headers, redirects --------------------------------------


@pytest.mark.parametrize("mode", ["not_json", "wrong_types", "bad_sha", "bad_etag", "gzip_bomb"])
def test_malformed_answers_are_field_errors_and_write_nothing_outside_the_cache(
    hub: Hub, tmp_path: Path, mode: str
) -> None:
    url, state = hub
    state.mode = mode
    home = tmp_path / "home"
    home.mkdir()
    before = _files_under(tmp_path)
    with pytest.raises(FieldError) as exc:
        resolve_model("acme/sharded-llama", settings=settings(url, home))
    assert exc.value.problems[0].loc == ("model",)
    outside = {p for p in _files_under(tmp_path) - before if home not in p.parents}
    assert outside == set()
    for p in _files_under(home):
        assert p.resolve().is_relative_to(home.resolve()) or not p.exists()


def test_a_redirect_to_another_port_is_not_followed(hub: Hub, tmp_path: Path) -> None:
    url, state = hub
    side = HubState()
    with hub_server(side) as side_url:
        state.redirect_to = side_url
        state.mode = "redirect"
        with pytest.raises(HubUnavailableError) as exc:
            resolve_model("acme/sharded-llama", settings=settings(url, tmp_path))
    assert "redirect" in exc.value.detail
    assert side.requests == []


# ---- 6, 9. the cache's real cause; the server's token --------------------------------------


def test_an_unwritable_cache_is_named_as_the_cause(hub: Hub, tmp_path: Path) -> None:
    url, _ = hub
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with pytest.raises(HubUnavailableError) as exc:
        resolve_model("acme/sharded-llama", settings=settings(url, blocker))
    assert "cannot be written" in exc.value.detail and "HF_HOME" in exc.value.detail
    assert "network" not in exc.value.detail


def test_the_servers_token_is_sent_only_for_allowed_repos(hub: Hub, tmp_path: Path) -> None:
    url, state = hub
    s = settings(url, tmp_path, token=GOOD_TOKEN, token_repos="other/*")
    with pytest.raises(GatedModelError) as exc:
        resolve_model("acme/gated-llama", settings=s)
    assert "KVPLAN_HUB_TOKEN_REPOS" in exc.value.detail
    assert all(q.authorization is None for q in state.requests)
    s = settings(url, tmp_path, token=GOOD_TOKEN, token_repos="acme/gated-*")
    assert resolve_model("acme/gated-llama", settings=s).source == "hub"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # A proxy from the machine's environment would answer for the loopback Hub.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    yield
