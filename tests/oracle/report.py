"""The oracle's end-of-run report, as a pytest plugin (registered by tests/conftest.py).

Prints the release matrix (engine, release, grid: N agree / M cases) and the per-figure
agreement summaries the oracle modules leave in the config's stash. Under pytest-xdist
(`make test` runs the suite on several workers, `--dist loadfile`) each oracle module runs whole
on one worker, so its session fixtures still see all of its cases; each worker hands its counts
and summaries to the controller, which prints them as a serial run would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.oracle.matrix import AGREEMENT, agreement_table

AGREEMENT_KEY = pytest.StashKey[dict[str, Any]]()
SUMMARY_KEY = pytest.StashKey[str]()
_MATRIX_OUT = "kvplan_oracle_matrix"
_SUMMARY_OUT = "kvplan_oracle_summary"


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = getattr(session.config, "workeroutput", None)
    if out is None:  # not an xdist worker
        return
    out[_MATRIX_OUT] = [[list(key), counts] for key, counts in AGREEMENT.items()]
    out[_SUMMARY_OUT] = session.config.stash.get(SUMMARY_KEY, "")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """On the xdist controller: one worker's matrix counts and summary, merged in."""
    out = getattr(node, "workeroutput", None) or {}
    for key, (agree, cases) in out.get(_MATRIX_OUT, []):
        row = AGREEMENT.setdefault(tuple(key), [0, 0])
        row[0] += agree
        row[1] += cases
    summary = out.get(_SUMMARY_OUT, "")
    if summary:
        before = node.config.stash.get(SUMMARY_KEY, "")
        node.config.stash[SUMMARY_KEY] = (before + "\n" if before else "") + summary


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if getattr(config, "workeroutput", None) is not None:
        return
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

