"""Prints the oracle's per-figure agreement at the end of the run (kept beside the tests)."""

from __future__ import annotations

from typing import Any

import pytest

AGREEMENT_KEY = pytest.StashKey[dict[str, Any]]()
SUMMARY_KEY = pytest.StashKey[str]()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    summary = config.stash.get(SUMMARY_KEY, None)
    if summary:
        terminalreporter.write_sep("-", "vLLM oracle agreement (N agree / M compared)")
        terminalreporter.write_line(summary)
