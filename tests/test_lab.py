"""The lab report as a whole (seed 000's lab), before any formatting."""

from __future__ import annotations

import pytest

from planner.core.units import GiB, KiB
from planner.lab.lab import run_lab, seed_kv_example


def test_seed_kv_line_numbers() -> None:
    # Seed 000: L=32, Hkv=8, d=128, 2 bytes -> 131072 bytes = 128 KiB per token; 8192 -> 1 GiB.
    kv = seed_kv_example()
    assert kv.bytes_per_token == 131072 == 128 * KiB
    assert (kv.tokens, kv.total_bytes) == (8192, 1 * GiB)


@pytest.mark.parametrize("seed", [0, 7])
def test_every_check_passes(seed: int) -> None:
    report = run_lab(seed)
    assert report.passed, report.checks
    # Default chunks 1,3,2,5: the second chunk (after 1 cached token) is where both bugs show.
    assert report.wrong_mask.first_mismatch == 1
    assert report.wrong_offset.first_mismatch == 1
    assert all(not q.within_tolerance for q in report.quantized)


def test_custom_chunks_move_the_first_mismatch() -> None:
    report = run_lab(3, (4, 1, 1))
    assert report.passed
    assert report.wrong_mask.first_mismatch == 4
