"""CPU probe: plumbing and invariants on tiny sizes (never speeds), plus its host readers."""

from __future__ import annotations

import itertools
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from planner.probe import AttentionShape, CalibrationIn, run_probe
from planner.probe.cpu import (
    CpuConfig,
    _Team,
    decode_grid,
    iter_chunks,
    last_level_cache_bytes,
    make_decode_analogue,
    reference_attention,
    usable_cores,
)
from planner.probe.timing import SweepConfig

KiB, MiB = 1 << 10, 1 << 20
SHAPE = AttentionShape(num_q_heads=8, num_kv_heads=2, head_dim=64)
LLC = 1 * MiB
TINY = CpuConfig(
    threads=2,
    read_max_bytes=8 * MiB,
    read_sizes=2,
    decode_min_bytes=256 * KiB,
    decode_max_bytes=2 * MiB,
    rotation_bytes=4 * MiB,
    min_fit_bytes=256 * KiB,
    llc_bytes=LLC,
    sweep=SweepConfig(
        passes=2,
        min_sample_seconds=1e-3,
        min_samples=2,
        max_samples=4,
        warmup_seconds=0.002,
        min_warmup_calls=1,
    ),
)


@pytest.fixture(scope="module")
def calibration() -> CalibrationIn:
    return run_probe("cpu", 20.0, shape=SHAPE, cpu_config=TINY)


def test_cpu_probe_is_labelled_as_cpu_figures(calibration: CalibrationIn) -> None:
    c = calibration
    assert c.device_kind == "cpu"
    assert c.backend == "numpy-cpu"
    assert c.dtype == "fp32"
    assert c.device_name.startswith("CPU: ")
    assert "cpu_figures" in c.flags
    assert any("CPU figures" in n for n in c.notes)
    assert c.attention_shape == SHAPE
    assert c.environment["threads"] == 2
    assert c.environment["last_level_cache_bytes"] == LLC
    assert c.measured_at is not None and c.measured_at.tzinfo is not None


def test_byte_accounting_is_logical(calibration: CalibrationIn) -> None:
    kinds = {p.kind for p in calibration.points}
    assert kinds == {"read", "copy", "decode"}
    for p in calibration.points:
        if p.kind == "read":
            assert p.working_set_bytes == p.bytes
        elif p.kind == "copy":
            assert p.bytes == 8 * MiB  # src + dst halves of the 8 MiB pool: 2N
        else:
            assert p.batch is not None and p.context_tokens is not None
            # K and V, every token, every KV head, fp32.
            assert p.bytes == 2 * p.batch * p.context_tokens * 2 * 64 * 4
            # Rotation: at least 2 buffers and at least the 4 MiB rotation target.
            assert p.working_set_bytes >= max(2 * p.bytes, 4 * MiB)
            assert p.working_set_bytes % p.bytes == 0


def test_point_statistics_are_consistent(calibration: CalibrationIn) -> None:
    for p in calibration.points:
        assert 0 < p.seconds_best <= p.seconds_median
        assert p.bandwidth_bytes_per_s == pytest.approx(p.bytes / p.seconds_median)
        assert p.samples >= 2
        assert p.coefficient_of_variation >= 0


def test_ceiling_and_fit_follow_from_the_points(calibration: CalibrationIn) -> None:
    c = calibration
    # The ceiling is the median read rate over sizes >= 4 x LLC (STREAM's rule).
    reads = [p for p in c.points if p.kind == "read" and p.working_set_bytes >= 4 * LLC]
    assert reads
    assert c.copy_bandwidth_bytes_per_s == pytest.approx(
        statistics.median(p.bandwidth_bytes_per_s for p in reads)
    )
    assert c.copy_bandwidth_best_bytes_per_s is not None
    assert c.copy_bandwidth_best_bytes_per_s >= c.copy_bandwidth_bytes_per_s
    assert c.decode_to_copy_ratio == pytest.approx(
        c.decode_bandwidth_bytes_per_s / c.copy_bandwidth_bytes_per_s
    )
    assert c.datasheet_bandwidth_bytes_per_s is None  # no datasheet row for a CPU
    if "fit_failed" in c.flags:
        return
    assert c.fit is not None
    used = [p for p in c.points if p.used_in_fit]
    assert len(used) == c.fit.points_used
    assert all(p.kind == "decode" and p.bytes >= c.fit.min_bytes for p in used)
    assert c.fixed_overhead_seconds >= 0
    assert c.half_performance_bytes == pytest.approx(
        c.fixed_overhead_seconds * c.decode_bandwidth_bytes_per_s
    )


def test_result_round_trips_as_json(calibration: CalibrationIn) -> None:
    again = CalibrationIn.model_validate_json(calibration.model_dump_json())
    assert again == calibration


def test_decode_analogue_matches_plain_attention() -> None:
    rng = np.random.default_rng(3)
    batch, ctx = 2, 48
    rows = batch * SHAPE.num_kv_heads
    per = rows * ctx * SHAPE.head_dim
    pool = rng.standard_normal(2 * per * 3).astype(np.float32)
    team = _Team(2)
    try:
        case = make_decode_analogue(team, pool, SHAPE, batch, ctx, 3, rng)
        case.time_calls(team, 2)  # buffers 0 and 1; out holds buffer 1's result
        k, v = case.buffers[1]
        np.testing.assert_allclose(
            case.out, reference_attention(case.q, k, v), rtol=1e-4, atol=1e-5
        )
        assert case.cursor == 2  # the next sample starts at buffer 2, not back at a warm one
    finally:
        team.close()


def test_decode_grid_doubles_bytes_and_mixes_batches() -> None:
    grid = decode_grid(SHAPE, min_bytes=256 * KiB, max_bytes=2 * MiB, itemsize=4)
    per_token = 2 * 2 * 64 * 4
    sizes = [b * c * per_token for b, c in grid]
    assert sizes == [256 * KiB, 512 * KiB, 1 * MiB, 2 * MiB]
    assert {b for b, _ in grid} == {1, 4, 16}


def test_chunks_are_disjoint_and_page_aligned() -> None:
    chunks = list(iter_chunks(10_000_000, 3))
    assert chunks[0][0] == 0 and chunks[-1][1] == 10_000_000
    assert all(a[1] == b[0] for a, b in itertools.pairwise(chunks))
    assert all(lo % 1024 == 0 for lo, _ in chunks)


def _cache(root: Path, cpu: int, index: int, level: int, kind: str, size: str, shared: str) -> None:
    d = root / f"cpu{cpu}" / "cache" / f"index{index}"
    d.mkdir(parents=True)
    for name, value in (
        ("level", level),
        ("type", kind),
        ("size", size),
        ("shared_cpu_list", shared),
    ):
        (d / name).write_text(f"{value}\n")


def test_llc_sums_distinct_l3_instances(tmp_path: Path) -> None:
    # Two CCXs, each a 32 MiB L3 shared by two CPUs; per-CPU 1 MiB L2s do not count.
    for cpu in range(4):
        _cache(tmp_path, cpu, 2, 2, "Unified", "1024K", str(cpu))
        shared = "0-1" if cpu < 2 else "2-3"
        _cache(tmp_path, cpu, 3, 3, "Unified", "32768K", shared)
    assert last_level_cache_bytes(tmp_path) == 64 * MiB


def test_llc_default_without_sysfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import planner.probe.cpu as cpu

    def no_lscpu(*args: object, **kwargs: object) -> object:
        raise OSError("no lscpu")

    monkeypatch.setattr(cpu.subprocess, "run", no_lscpu)
    assert last_level_cache_bytes(tmp_path) == 32 * MiB


def test_usable_cores_is_positive() -> None:
    assert usable_cores() >= 1


def test_probe_package_imports_without_torch() -> None:
    code = (
        "import sys, planner.probe, planner.probe.run, planner.store\n"
        "assert 'torch' not in sys.modules, 'torch imported eagerly'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
