"""The release-matrix machinery itself (tests/oracle/matrix.py), on a stand-in engine: a
harness that doubles each input, run by this interpreter as the release's "virtualenv"."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.oracle import matrix

HARNESS = """
import json, sys
cases = json.load(open(sys.argv[1]))
results = [{"id": c["id"], "twice": 2 * c["x"]} for c in cases]
json.dump({"meta": {"fake_version": sys.argv[0].split("@")[-1][:-3]}, "results": results},
          open(sys.argv[2], "w"))
"""


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repo root with two releases of engine `fake`, 2.1.0 and 2.0.0 sharing 1.9.0's code."""
    here = tmp_path / "tests" / "oracle"
    here.mkdir(parents=True)
    (here / "versions-fake.txt").write_text("# newest first\n2.1.0\n2.0.0 1.9.0\n1.9.0\n")
    for release in ("2.1.0", "2.0.0", "1.9.0"):
        (here / f"h@{release}.py").write_text(HARNESS)
        venv_bin = tmp_path / f".venv-fake-{release}" / "bin"
        venv_bin.mkdir(parents=True)
        (venv_bin / "python").symlink_to(sys.executable)
        (venv_bin.parent / ".wheel").write_text(f"fake-{release}.whl {'ab' * 32}\n")
    monkeypatch.setattr(matrix, "HERE", here)
    monkeypatch.setattr(matrix, "ROOT", tmp_path)
    monkeypatch.setattr(matrix, "FIXTURES", here / "fixtures")
    monkeypatch.setitem(matrix.ENGINE_VENV, "fake", ".venv-fake-{release}")
    for k in ("KVPLAN_ORACLE_RELEASE", "KVPLAN_ORACLE_WRITE", "CI", "KVPLAN_REQUIRE_ORACLE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("KVPLAN_ORACLE_ENGINE", "fake")
    return tmp_path


def _inputs(release: str, n: int = 3) -> list[dict[str, Any]]:
    minor = ".".join(release.split(".")[:2])
    return [{"id": f"v{minor}-case{i}", "x": i} for i in range(n)]


def _ask(release: str, inputs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    # The shared release runs its own harness file, named after the release it is.
    return matrix.oracle_results(
        release, f"h@{release}.py", inputs or _inputs(release), engine="fake", name="h"
    )


def test_releases_and_shared_fixtures_are_read_from_the_list(fake: Path) -> None:
    assert matrix.releases("fake") == ("2.1.0", "2.0.0", "1.9.0")
    assert matrix.fixture_release("2.0.0", "fake") == "1.9.0"
    assert matrix.fixture_release("2.1.0", "fake") == "2.1.0"


def test_write_then_read_with_provenance(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(pytest.fail.Exception, match="no fixture"):
        _ask("2.1.0")
    monkeypatch.setenv("KVPLAN_ORACLE_RELEASE", "2.1.0")
    monkeypatch.setenv("KVPLAN_ORACLE_WRITE", "1")
    live = _ask("2.1.0")
    assert live["v2.1-case2"] == {"id": "v2.1-case2", "twice": 4}
    path = matrix.fixture_path("fake", "2.1.0", "h")
    data = json.loads(path.read_text())
    prov = data["provenance"]
    assert prov["release"] == "2.1.0" and prov["cases"] == 3
    assert prov["meta_wheel"] == "fake-2.1.0.whl" and prov["meta_wheel_sha256"] == "ab" * 32
    assert len(prov["harness_sha256"]) == len(prov["inputs_sha256"]) == 64
    # Stored without the release tag, one result a line.
    assert [r["id"] for r in data["results"]] == ["case0", "case1", "case2"]
    assert len(path.read_text().splitlines()) == 3 + 3
    monkeypatch.delenv("KVPLAN_ORACLE_RELEASE")
    monkeypatch.delenv("KVPLAN_ORACLE_WRITE")
    assert _ask("2.1.0") == live  # make test: from the fixture, no engine


def test_stale_fixture_fails_naming_the_command(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVPLAN_ORACLE_RELEASE", "2.1.0")
    monkeypatch.setenv("KVPLAN_ORACLE_WRITE", "1")
    _ask("2.1.0")
    monkeypatch.delenv("KVPLAN_ORACLE_RELEASE")
    monkeypatch.delenv("KVPLAN_ORACLE_WRITE")
    with pytest.raises(pytest.fail.Exception, match=r"stale \(inputs.*oracle-update"):
        _ask("2.1.0", _inputs("2.1.0", 4))
    (matrix.HERE / "h@2.1.0.py").write_text(HARNESS + "\n# edited\n")
    with pytest.raises(pytest.fail.Exception, match=r"stale \(harness"):
        _ask("2.1.0")


def test_live_run_fails_on_any_difference(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVPLAN_ORACLE_RELEASE", "2.1.0")
    monkeypatch.setenv("KVPLAN_ORACLE_WRITE", "1")
    _ask("2.1.0")
    monkeypatch.delenv("KVPLAN_ORACLE_WRITE")
    assert _ask("2.1.0")["v2.1-case1"]["twice"] == 2  # same code, same answers: passes
    (matrix.HERE / "h@2.1.0.py").write_text(HARNESS.replace("2 * c", "3 * c"))
    with pytest.raises(pytest.fail.Exception, match=r"(?s)on 2 case\(s\).*case1: twice: 2 -> 3"):
        _ask("2.1.0")


def test_shared_release_is_checked_against_the_other_fixture(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVPLAN_ORACLE_RELEASE", "1.9.0")
    monkeypatch.setenv("KVPLAN_ORACLE_WRITE", "1")
    _ask("1.9.0")
    monkeypatch.delenv("KVPLAN_ORACLE_WRITE")
    monkeypatch.delenv("KVPLAN_ORACLE_RELEASE")
    # make test: 2.0.0's cases are answered from 1.9.0's fixture, under 2.0.0's ids.
    assert _ask("2.0.0")["v2.0-case2"] == {"id": "v2.0-case2", "twice": 4}
    monkeypatch.setenv("KVPLAN_ORACLE_RELEASE", "2.0.0")
    assert _ask("2.0.0")["v2.0-case1"]["twice"] == 2  # live 2.0.0 gives 1.9.0's answers
    (matrix.HERE / "h@2.0.0.py").write_text(HARNESS.replace("2 * c", "5 * c"))
    with pytest.raises(pytest.fail.Exception, match="needs a fixture of its own"):
        _ask("2.0.0")
    assert not matrix.fixture_path("fake", "2.0.0", "h").exists()


def test_live_release_is_per_engine(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVPLAN_ORACLE_RELEASE", "2.1.0")
    assert matrix.live_release("fake") == "2.1.0"
    assert matrix.live_release("vllm") is None  # another engine's release is not run live


def test_missing_virtualenv_fails_where_required(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVPLAN_ORACLE_RELEASE", "3.0.0")
    monkeypatch.setenv("KVPLAN_REQUIRE_ORACLE", "1")
    with pytest.raises(pytest.fail.Exception, match="oracle virtualenv is missing"):
        matrix.oracle_results("3.0.0", "h@2.1.0.py", _inputs("3.0.0"), engine="fake")


def test_whole_release_tags_share_the_fixture_too(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Several patch releases of one minor in one module tag ids with the whole release
    # ("v2.0.0-…"); the fixture still stores them untagged, so 2.0.0 reads 1.9.0's answers.
    monkeypatch.setenv("KVPLAN_ORACLE_RELEASE", "1.9.0")
    monkeypatch.setenv("KVPLAN_ORACLE_WRITE", "1")
    _ask("1.9.0", [{"id": f"v1.9.0-case{i}", "x": i} for i in range(3)])
    monkeypatch.delenv("KVPLAN_ORACLE_WRITE")
    monkeypatch.delenv("KVPLAN_ORACLE_RELEASE")
    stored = matrix.fixture_path("fake", "1.9.0", "h").read_text()
    assert "v1.9" not in stored and '"case2"' in stored
    whole = [{"id": f"v2.0.0-case{i}", "x": i} for i in range(3)]
    assert _ask("2.0.0", whole)["v2.0.0-case2"] == {"id": "v2.0.0-case2", "twice": 4}


def test_acceptance_verdict_names_each_disagreement() -> None:
    ran = {"accepted": True, "error": None}
    refused = {"accepted": False, "error": "too long"}
    named = {"accepted": False, "error": "x", "fields": ["max_model_len"]}
    unnamed = {"accepted": False, "error": "x", "fields": []}
    planned = {"accepted": True, "error": None, "fields": []}
    assert matrix.acceptance_verdict("E", ran, planned) == "ok"
    assert matrix.acceptance_verdict("E", refused, named) == "ok"
    assert matrix.acceptance_verdict("E", refused, planned).startswith("E refuses (too long)")
    assert "names no field" in matrix.acceptance_verdict("E", refused, unnamed)
    assert matrix.acceptance_verdict("E", ran, named).startswith("E runs it; the planner refuses")
