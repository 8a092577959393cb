"""The fit `t = t0 + bytes / BW_eff`: recovered from synthetic timings, flags, the sweep loop.

The reference device is the H100 FlashInfer decode fit derived in research/probe.md: t0 ~= 20 us,
BW_eff ~= 3.1 TB/s (so n_half ~= 62 MB). Timings are generated from it by a fake clock, never
taken from the implementation's own output.
"""

from __future__ import annotations

import random

import pytest

from planner.probe.fit import (
    FitError,
    TimedPoint,
    assess,
    ceiling,
    fit_affine,
    piecewise_fits,
)
from planner.probe.timing import Case, Deadline, SweepConfig, sweep

MiB = 1 << 20
T0 = 20e-6
BW = 3.1e12
SIZES = [MiB << k for k in range(11)]  # 1 MiB .. 1 GiB


def exact(n_bytes: int, t0: float = T0, bw: float = BW) -> float:
    return t0 + n_bytes / bw


class FakeDevice:
    """A device whose clock advances by t0 + bytes/BW per call, with multiplicative jitter."""

    def __init__(self, t0: float, bw: float, jitter: float, seed: int = 0) -> None:
        self.now = 0.0
        self.t0, self.bw, self.jitter = t0, bw, jitter
        self.rng = random.Random(seed)

    def clock(self) -> float:
        return self.now

    def case(self, n_bytes: int) -> Case:
        def time_calls(n: int) -> float:
            start = self.clock()
            for _ in range(n):
                noise = 1.0 + self.jitter * self.rng.uniform(-1.0, 1.0)
                self.now += (self.t0 + n_bytes / self.bw) * noise
            return self.clock() - start

        return Case("decode", n_bytes, 4 * n_bytes, time_calls)


def test_exact_points_recover_t0_and_bandwidth() -> None:
    fit = fit_affine([TimedPoint(b, exact(b)) for b in SIZES], min_bytes=4 * MiB)
    assert fit.fixed_overhead_seconds == pytest.approx(T0, rel=1e-9)
    assert fit.bandwidth_bytes_per_s == pytest.approx(BW, rel=1e-9)
    assert fit.half_performance_bytes == pytest.approx(T0 * BW, rel=1e-9)
    assert fit.points_used == len([b for b in SIZES if b >= 4 * MiB])
    assert fit.max_abs_relative_residual < 1e-9
    assert fit.r_squared == pytest.approx(1.0)


def test_fake_timer_through_the_sweep_recovers_within_one_percent() -> None:
    device = FakeDevice(T0, BW, jitter=0.05)
    cases = [device.case(b) for b in SIZES]
    config = SweepConfig(passes=3, min_sample_seconds=1e-3, min_samples=5, max_samples=20)
    truncated = sweep(cases, config, Deadline(60.0), rng=random.Random(1))
    assert not truncated
    assert all(len(c.pass_medians) == 3 for c in cases)
    fit = fit_affine([c.summary() for c in cases], min_bytes=4 * MiB)
    assert fit.fixed_overhead_seconds == pytest.approx(T0, rel=0.01)
    assert fit.bandwidth_bytes_per_s == pytest.approx(BW, rel=0.01)


def test_small_sizes_in_another_regime_are_left_out_of_the_fit() -> None:
    # FlashInfer's tiny sizes run *below* t0 (~8-10 us at a few hundred kB): not the same law.
    small = [TimedPoint(b, 9e-6) for b in (64 << 10, 256 << 10, 512 << 10)]
    big = [TimedPoint(b, exact(b)) for b in SIZES if b >= 4 * MiB]
    fit = fit_affine([*small, *big], min_bytes=4 * MiB)
    assert fit.fixed_overhead_seconds == pytest.approx(T0, rel=1e-9)
    assert fit.bandwidth_bytes_per_s == pytest.approx(BW, rel=1e-9)
    assert not fit.small_size_only


def test_too_few_large_points_fit_everything_and_say_so() -> None:
    points = [TimedPoint(b, exact(b)) for b in (MiB, 2 * MiB, 8 * MiB)]
    fit = fit_affine(points, min_bytes=4 * MiB)
    assert fit.small_size_only
    assert fit.points_used == 3


def test_negative_intercept_is_clamped_to_a_proportional_fit() -> None:
    # t = B / BW - 5 us: unphysical negative fixed cost.
    points = [TimedPoint(b, b / BW - 5e-6) for b in SIZES[4:]]
    fit = fit_affine(points, min_bytes=0)
    assert fit.clamped
    assert fit.fixed_overhead_seconds == 0.0
    assert fit.bandwidth_bytes_per_s > 0


@pytest.mark.parametrize(
    "points",
    [
        [TimedPoint(MiB, 1e-3)],
        [TimedPoint(MiB, 1e-3), TimedPoint(MiB, 1.1e-3)],
        [TimedPoint(b, 1e-3 - b * 1e-13) for b in SIZES],  # time falls with size
    ],
)
def test_unfittable_points_raise(points: list[TimedPoint]) -> None:
    with pytest.raises(FitError):
        fit_affine(points, min_bytes=0)


def test_piecewise_fits_when_one_law_misses() -> None:
    # Two regimes: a slow kernel up to 64 MiB, a fast one above (split-KV switching on).
    low = [TimedPoint(b, exact(b, 5e-6, 1.0e12)) for b in SIZES[2:7]]
    high = [TimedPoint(b, exact(b, 60e-6, 3.0e12)) for b in SIZES[7:]]
    fit = fit_affine([*low, *high], min_bytes=0)
    assert fit.max_abs_relative_residual > 0.15
    pieces = piecewise_fits([*low, *high], fit)
    assert len(pieces) == 2
    assert all(p.bandwidth_bytes_per_s > 0 for p in pieces)


def test_clean_fit_has_no_piecewise() -> None:
    points = [TimedPoint(b, exact(b)) for b in SIZES]
    assert piecewise_fits(points, fit_affine(points, min_bytes=0)) == []


def test_assess_ratios_against_copy_and_datasheet() -> None:
    points = [TimedPoint(b, exact(b), working_set_bytes=1 << 30) for b in SIZES[2:]]
    fit = fit_affine(points, min_bytes=0)
    # H100 SXM datasheet 3.35 TB/s; a copy ceiling of 0.9 x that.
    a = assess(
        fit, points, copy_bandwidth_bytes_per_s=3.015e12, datasheet_bandwidth_bytes_per_s=3.35e12
    )
    assert a.decode_to_copy_ratio == pytest.approx(BW / 3.015e12)
    assert a.decode_to_datasheet_ratio == pytest.approx(BW / 3.35e12)
    assert a.copy_to_datasheet_ratio == pytest.approx(0.9)
    assert a.flags == ()


def test_assess_flags_rates_above_the_datasheet_as_cache_resident() -> None:
    points = [TimedPoint(b, exact(b), working_set_bytes=1 << 30) for b in SIZES[2:]]
    fit = fit_affine(points, min_bytes=0)
    # A 2 TB/s datasheet: the 3.1 TB/s kernel can only be reading from cache.
    a = assess(fit, points, copy_bandwidth_bytes_per_s=3.2e12, datasheet_bandwidth_bytes_per_s=2e12)
    assert "cache_resident_suspect" in a.flags


def test_assess_flags_decode_faster_than_copy_and_small_working_sets() -> None:
    points = [TimedPoint(b, exact(b), working_set_bytes=b) for b in SIZES[2:]]
    fit = fit_affine(points, min_bytes=0)
    a = assess(fit, points, copy_bandwidth_bytes_per_s=1e12)
    assert "cache_resident_suspect" in a.flags
    a = assess(fit, points, copy_bandwidth_bytes_per_s=3.2e12, cache_bytes=50 * MiB)
    assert "cache_resident_suspect" in a.flags  # 4 MiB working sets vs a 50 MB L2


def test_assess_flags_unstable_repeats() -> None:
    points = [
        TimedPoint(b, exact(b), coefficient_of_variation=0.2, working_set_bytes=1 << 30)
        for b in SIZES[2:]
    ]
    fit = fit_affine(points, min_bytes=0)
    a = assess(fit, points, copy_bandwidth_bytes_per_s=3.2e12)
    assert "unstable" in a.flags


def test_ceiling_takes_the_median_of_asymptotic_sizes() -> None:
    pts = [
        TimedPoint(64 * MiB, 64 * MiB / 5e12, working_set_bytes=64 * MiB),  # L2-inflated
        TimedPoint(
            512 * MiB,
            512 * MiB / 3.0e12,
            working_set_bytes=512 * MiB,
            seconds_best=512 * MiB / 3.1e12,
        ),
        TimedPoint(1024 * MiB, 1024 * MiB / 3.0e12, working_set_bytes=1024 * MiB),
        TimedPoint(2048 * MiB, 2048 * MiB / 2.9e12, working_set_bytes=2048 * MiB),
    ]
    median, best, small_only = ceiling(pts, asymptotic_bytes=400 * MiB)
    assert median == pytest.approx(3.0e12)
    assert best == pytest.approx(3.1e12)
    assert not small_only
    median, _, small_only = ceiling(pts[:1], asymptotic_bytes=400 * MiB)
    assert small_only and median == pytest.approx(5e12)
