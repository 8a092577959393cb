"""The helpers the oracle test modules share (tests/oracle/matrix.py does the work; the
end-of-run report is the plugin tests/oracle/report.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.oracle.matrix import oracle_results, release_python
from tests.oracle.report import AGREEMENT_KEY, SUMMARY_KEY

__all__ = ["AGREEMENT_KEY", "SUMMARY_KEY", "require_oracle_python", "run_cached_oracle"]


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
