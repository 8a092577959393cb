"""The release matrix: an engine's own sizing code, run once per release, stored as fixtures.

Each harness in tests/oracle runs inside one engine release's own virtualenv and writes
`{"meta": ..., "results": [...]}` for a list of inputs the test module generates. Its output is
kept in the repo, under `tests/oracle/fixtures/<engine>/<release>/<name>.json`, with provenance:
the wheel's file name and sha256, the harness's sha256 (with the files it imports), the pinned
set it ran on, the inputs' sha256 and the date. So:

- `make test` (mode `fixtures`, the default) reads the fixtures and installs no engine. A fixture
  whose inputs or harness no longer match what the tests generate fails, naming the command that
  regenerates it: a stale fixture never passes for a fresh one.
- `make oracle RELEASE=…` (mode `live`, `KVPLAN_ORACLE_RELEASE`) runs that release's harnesses
  live and fails on any difference from its fixture (case by case); other releases still come
  from their fixtures.
- `make oracle-update RELEASE=…` (`KVPLAN_ORACLE_WRITE=1`) runs live and writes the fixture.

Another engine (SGLang) plugs in with its own `engine` name and venv prefix (ENGINE_VENV).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FIXTURES = HERE / "fixtures"
# Where each engine's release virtualenvs live (the Makefile builds them).
ENGINE_VENV = {"vllm": ".venv-oracle-{release}", "sglang": ".venv-oracle-sglang-{release}"}
# Files the Makefile writes into a release's virtualenv when it installs the wheel.
WHEEL_FILE = ".wheel"


def _release_table(engine: str) -> dict[str, str]:
    """versions.txt (vllm) or versions-<engine>.txt: one release a line, newest first; a second
    column names the release whose fixture it shares (its sizing code was read to be the same)."""
    path = HERE / ("versions.txt" if engine == "vllm" else f"versions-{engine}.txt")
    table: dict[str, str] = {}
    for line in path.read_text().splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            table[words[0]] = words[1] if len(words) > 1 else words[0]
    return table


def releases(engine: str = "vllm") -> tuple[str, ...]:
    """Every release the matrix checks the planner at, newest first."""
    return tuple(_release_table(engine))


def fixture_release(release: str, engine: str = "vllm") -> str:
    """The release whose stored answers `release` is checked against (itself, or the release
    with the same sizing code)."""
    return _release_table(engine).get(release, release)


# (engine, release, grid) -> [cases that agree on every figure, cases compared]
AGREEMENT: dict[tuple[str, str, str], list[int]] = {}


def record(engine: str, release: str, grid: str, agrees: bool) -> None:
    """Count one compared case for the matrix table printed at the end of the run."""
    row = AGREEMENT.setdefault((engine, release, grid), [0, 0])
    row[0] += agrees
    row[1] += 1


def acceptance_verdict(engine_label: str, theirs: dict[str, Any], mine: dict[str, Any]) -> str:
    """Whether both sides accept a case: "ok", or a one-line difference. Each side is
    `{"accepted": bool, "error": str | None}`, the planner's also `"fields"` (the request fields
    its refusal names, which a refusal must have)."""
    if not theirs["accepted"]:
        if mine["accepted"]:
            return f"{engine_label} refuses ({theirs['error'][:300]}); the planner plans it"
        if not mine["fields"]:
            return f"both refuse, but the planner names no field: {mine['error']}"
        return "ok"
    if not mine["accepted"]:
        return f"{engine_label} runs it; the planner refuses: {str(mine['error'])[:300]}"
    return "ok"


def agreement_table() -> str:
    """The matrix as a Markdown table (README): engine, release, grid, N agree / M cases."""
    lines = [
        "| engine | release | grid | cases | agree on every figure |",
        "|---|---|---|---:|---:|",
    ]
    for (engine, release, grid), (n, m) in sorted(
        AGREEMENT.items(), key=lambda kv: (kv[0][0], _order(kv[0][1]), kv[0][2])
    ):
        lines.append(f"| {engine} | {release} | {grid} | {m} | {n}/{m} |")
    return "\n".join(lines)


def _order(release: str) -> tuple[int, ...]:
    digits = [int("".join(ch for ch in x if ch.isdigit()) or 0) for x in release.split(".")]
    return tuple(-d for d in digits)


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "true", "yes")


def live_release(engine: str = "vllm") -> str | None:
    """The release of `engine` whose harnesses run live in this session (make oracle), or None."""
    if os.environ.get("KVPLAN_ORACLE_ENGINE", "vllm") != engine:
        return None
    return os.environ.get("KVPLAN_ORACLE_RELEASE") or None


def _required() -> bool:
    return any(_truthy(k) for k in ("CI", "KVPLAN_REQUIRE_ORACLE"))


def _regenerate_hint(engine: str, release: str) -> str:
    return f"`make oracle-update ENGINE={engine} RELEASE={release}`"


def release_python(engine: str, release: str) -> Path:
    """The release virtualenv's python; a missing one fails where the oracle is required."""
    venv = ROOT / ENGINE_VENV[engine].format(release=release)
    python = venv / "bin" / "python"
    if not python.exists():
        missing = (
            f"the {engine} {release} oracle virtualenv is missing ({venv}); "
            f"`make oracle RELEASE={release}` builds it"
        )
        if _required():
            pytest.fail(missing)
        pytest.skip(missing)
    return python


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _harness_sha(harness: str, also_read: Sequence[str]) -> str:
    return _sha256(b"\0".join((HERE / n).read_bytes() for n in (harness, *also_read)))


def fixture_path(engine: str, release: str, name: str) -> Path:
    return FIXTURES / engine / release / f"{name}.json"


def _read_fixture(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _write_fixture(path: Path, provenance: dict[str, Any], results: list[dict[str, Any]]) -> None:
    """One result a line, sorted by id: a regenerated fixture diffs case by case."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = sorted(results, key=lambda r: str(r.get("id")))
    lines = ['{"provenance": ' + json.dumps(provenance, sort_keys=True) + ",", ' "results": [']
    lines += [
        "  " + json.dumps(r, sort_keys=True) + ("," if i < len(rows) - 1 else "")
        for i, r in enumerate(rows)
    ]
    lines += [" ]}", ""]
    tmp = path.with_suffix(".part")
    tmp.write_text("\n".join(lines))
    tmp.rename(path)


def _run_live(
    engine: str,
    release: str,
    harness: str,
    inputs: list[dict[str, Any]],
    *,
    timeout_s: int,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    python = release_python(engine, release)
    work = ROOT / ".pytest_cache" / "oracle-live"
    work.mkdir(parents=True, exist_ok=True)
    stem = f"{engine}-{release}-{Path(harness).stem}-{os.getpid()}"
    in_path, out_path = work / f"{stem}.in.json", work / f"{stem}.out.json"
    in_path.write_text(json.dumps(inputs))
    out_path.unlink(missing_ok=True)
    proc = subprocess.run(
        [str(python), str(HERE / harness), str(in_path), str(out_path)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"},
    )
    if proc.returncode != 0 or not out_path.exists():
        pytest.fail(
            f"the {engine} {release} oracle ({harness}) failed (rc {proc.returncode}):\n"
            f"{proc.stderr[-4000:]}"
        )
    data = json.loads(out_path.read_text())
    wheel = python.parent.parent / WHEEL_FILE
    meta = dict(data["meta"])
    if wheel.exists():
        name, sha = wheel.read_text().split()[:2]
        meta.update(wheel=name, wheel_sha256=sha)
    return meta, list(data["results"])


def _differences(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[str]:
    a = {r["id"]: r for r in old}
    b = {r["id"]: r for r in new}
    out = [f"{k}: only in the fixture" for k in sorted(a.keys() - b.keys())]
    out += [f"{k}: only in the live run" for k in sorted(b.keys() - a.keys())]
    for k in sorted(a.keys() & b.keys()):
        if a[k] != b[k]:
            keys = sorted(f for f in a[k].keys() | b[k].keys() if a[k].get(f) != b[k].get(f))
            diff = "; ".join(f"{f}: {a[k].get(f)!r} -> {b[k].get(f)!r}" for f in keys[:4])
            out.append(f"{k}: {diff[:400]}")
    return out


def _untagged(case_id: str, tags: tuple[str, ...]) -> str:
    for tag in tags:
        if case_id.startswith(tag):
            return case_id[len(tag) :]
    return case_id


def oracle_results(
    release: str,
    harness: str,
    inputs: list[dict[str, Any]],
    *,
    name: str | None = None,
    engine: str = "vllm",
    also_read: Sequence[str] = (),
    timeout_s: int = 3600,
) -> dict[str, dict[str, Any]]:
    """{case id -> the engine's own figures} for one harness at one release: from the stored
    fixture, or live for the release `make oracle` names (then checked against the fixture)."""
    name = name or Path(harness).stem
    path = fixture_path(engine, fixture_release(release, engine), name)
    # Case ids may carry the release ("v0.5.23-…" or, where one release per minor is checked,
    # "v0.33-…"), unique across releases in one test module; fixtures store them without it,
    # so releases with the same code share one fixture.
    tags = ("v" + release + "-", "v" + ".".join(release.split(".")[:2]) + "-")
    original = {_untagged(i, tags): i for i in (c["id"] for c in inputs)}
    inputs = [dict(c, id=k) for k, c in zip(original, inputs, strict=True)]
    inputs_sha = _sha256(_canonical(inputs))
    harness_sha = _harness_sha(harness, also_read)
    fixture = _read_fixture(path)
    hint = _regenerate_hint(engine, release)
    if live_release(engine) != release:
        if fixture is None:
            pytest.fail(f"no fixture {path.relative_to(ROOT)} for {engine} {release}; {hint}")
        if fixture["provenance"].get("release") != fixture_release(release, engine):
            pytest.fail(f"fixture {path.relative_to(ROOT)} holds another release's answers")
        prov = fixture["provenance"]
        stale = [
            what
            for what, want, got in (
                ("inputs", inputs_sha, prov.get("inputs_sha256")),
                ("harness", harness_sha, prov.get("harness_sha256")),
            )
            if want != got
        ]
        if stale:
            pytest.fail(
                f"fixture {path.relative_to(ROOT)} is stale ({' and '.join(stale)} changed "
                f"since {prov.get('date')}); {hint}"
            )
        return _by_id(fixture["results"], original)
    meta, results = _run_live(engine, release, harness, inputs, timeout_s=timeout_s)
    got = meta.get(f"{engine}_version")
    assert got == release, f"oracle virtualenv has {engine} {got}, expected {release}"
    prefix = "" if engine == "vllm" else f"{engine}-"
    requirements = HERE / f"requirements-{prefix}{release}.txt"
    provenance = {
        "engine": engine,
        "release": release,
        "harness": harness,
        "also_read": list(also_read),
        "harness_sha256": harness_sha,
        "inputs_sha256": inputs_sha,
        "cases": len(inputs),
        "requirements_sha256": (
            _sha256(requirements.read_bytes()) if requirements.exists() else None
        ),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        **{f"meta_{k}": v for k, v in meta.items()},
    }
    if fixture_release(release, engine) != release:
        # A release that shares another's fixture is only ever compared with it.
        if fixture is None:
            pytest.fail(f"no fixture {path.relative_to(ROOT)} to compare {engine} {release} with")
        diffs = _differences(fixture["results"], results)
        if diffs:
            shown = "\n  ".join(diffs[:40])
            pytest.fail(
                f"{engine} {release} does not give the answers of {path.relative_to(ROOT)} "
                f"on {len(diffs)} case(s): it needs a fixture of its own:\n  {shown}"
            )
        return _by_id(results, original)
    if _truthy("KVPLAN_ORACLE_WRITE") or fixture is None:
        _write_fixture(path, provenance, results)
        if fixture is None and not _truthy("KVPLAN_ORACLE_WRITE"):
            pytest.fail(f"wrote a new fixture {path.relative_to(ROOT)}: review and commit it")
        return _by_id(results, original)
    diffs = _differences(fixture["results"], results)
    if diffs:
        shown = "\n  ".join(diffs[:40])
        pytest.fail(
            f"{engine} {release} ({harness}) live differs from {path.relative_to(ROOT)} "
            f"on {len(diffs)} case(s):\n  {shown}\n{hint} rewrites it"
        )
    old = fixture["provenance"]
    if (old.get("harness_sha256"), old.get("inputs_sha256")) != (harness_sha, inputs_sha):
        # Same answers from an edited harness: only the provenance moves on.
        _write_fixture(path, provenance, results)
    return _by_id(results, original)


def _by_id(results: list[dict[str, Any]], original: dict[str, str]) -> dict[str, dict[str, Any]]:
    """{the caller's case id -> result}, each result carrying the caller's id."""
    return {
        original.get(r["id"], r["id"]): dict(r, id=original.get(r["id"], r["id"])) for r in results
    }
