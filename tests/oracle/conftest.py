"""Prints the oracle's per-figure agreement at the end of the run (kept beside the tests), and
the helpers the oracle test modules share (tests/oracle/matrix.py does the work)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.oracle.matrix import AGREEMENT, agreement_table, oracle_results, release_python

AGREEMENT_KEY = pytest.StashKey[dict[str, Any]]()
SUMMARY_KEY = pytest.StashKey[str]()


def require_oracle_python(version: str) -> Path:
    """vLLM `version`'s oracle virtualenv python (for live probes; make oracle builds it)."""
    return release_python("vllm", version)


def run_cached_oracle(
    version: str,
    harness: str,
    inputs: list[dict[str, Any]],
    cache_dir: Path | None = None,
    *,
    prefix: str = "",
    also_read: Sequence[str] = (),
    timeout_s: int = 3600,
) -> dict[str, dict[str, Any]]:
    """{case id -> vLLM's figures} for one harness at one release, from its stored fixture (or
    live under `make oracle`). `cache_dir` and `prefix` are kept for callers; unused."""
    del cache_dir, prefix
    return oracle_results(version, harness, inputs, also_read=also_read, timeout_s=timeout_s)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if AGREEMENT:
        table = agreement_table()
        out = Path(config.rootpath) / ".pytest_cache" / "oracle-matrix.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(table + "\n")
        terminalreporter.write_sep("-", f"release matrix (also in {out})")
        terminalreporter.write_line(table)
    summary = config.stash.get(SUMMARY_KEY, None)
    if summary:
        terminalreporter.write_sep("-", "vLLM oracle agreement (N agree / M compared)")
        terminalreporter.write_line(summary)
