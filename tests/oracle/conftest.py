"""Prints the oracle's per-figure agreement at the end of the run (kept beside the tests)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

AGREEMENT_KEY = pytest.StashKey[dict[str, Any]]()
SUMMARY_KEY = pytest.StashKey[str]()


def require_oracle_python(version: str) -> Path:
    """The oracle virtualenv's python for a vLLM release; a missing one fails the test where
    `make test` or CI runs it (KVPLAN_REQUIRE_ORACLE, CI) and is skipped elsewhere."""
    python = ROOT / f".venv-oracle-{version}" / "bin" / "python"
    if not python.exists():
        missing = f"the vLLM {version} oracle virtualenv is missing ({python}); run `make oracle`"
        required = (os.environ.get(k, "").lower() for k in ("CI", "KVPLAN_REQUIRE_ORACLE"))
        if any(v in ("1", "true", "yes") for v in required):
            pytest.fail(missing)
        pytest.skip(missing)
    return python


def run_cached_oracle(
    version: str,
    harness: str,
    inputs: list[dict[str, Any]],
    cache_dir: Path,
    *,
    prefix: str = "",
    also_read: Sequence[str] = (),
    timeout_s: int = 1800,
) -> dict[str, dict[str, Any]]:
    """Run one harness of tests/oracle in the release's virtualenv over every input, in one
    subprocess; the answer is cached by content (the inputs, the release, the harness and the
    files it imports, the pinned set it runs on). Returns {case id -> vLLM's figures}."""
    python = require_oracle_python(version)
    here = Path(__file__).resolve().parent
    parts = [json.dumps(inputs, sort_keys=True).encode(), version.encode()]
    parts += [(here / n).read_bytes() for n in (harness, *also_read)]
    parts.append((here / f"requirements-{version}.txt").read_bytes())
    key = hashlib.sha256(b"\0".join(parts)).hexdigest()[:20]
    out_path = cache_dir / f"{prefix}{version}-{key}.json"
    if not out_path.exists():
        in_path = cache_dir / f"{prefix}{version}-{key}.in.json"
        in_path.write_text(json.dumps(inputs))
        tmp = out_path.with_suffix(".part")
        proc = subprocess.run(
            [str(python), str(here / harness), str(in_path), str(tmp)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"},
        )
        if proc.returncode != 0 or not tmp.exists():
            pytest.fail(
                f"the vLLM {version} oracle ({harness}) failed (rc {proc.returncode}):\n"
                f"{proc.stderr[-4000:]}"
            )
        tmp.rename(out_path)
    data = json.loads(out_path.read_text())
    got = data["meta"]["vllm_version"]
    assert got == version, f"oracle virtualenv has vLLM {got}, expected {version}"
    return {r["id"]: r for r in data["results"]}


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    summary = config.stash.get(SUMMARY_KEY, None)
    if summary:
        terminalreporter.write_sep("-", "vLLM oracle agreement (N agree / M compared)")
        terminalreporter.write_line(summary)
