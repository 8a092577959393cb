"""Prints the oracle's per-figure agreement at the end of the run (kept beside the tests)."""

from __future__ import annotations

import os
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


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    summary = config.stash.get(SUMMARY_KEY, None)
    if summary:
        terminalreporter.write_sep("-", "vLLM oracle agreement (N agree / M compared)")
        terminalreporter.write_line(summary)
