"""Fit `t = t0 + bytes / BW_eff` (Hockney's alpha-beta model) to probe timings. Pure: no I/O.

The fit minimises *relative* error (weights 1/t^2): a 10 us point and a 1 ms point count alike,
so the many small, cheap points do not swamp the few large ones. It runs over points with
`bytes >= min_bytes` only, because below the half-performance size `n_half = t0 * BW_eff` kernels
switch regimes (split counts, grid fill) and one affine law no longer holds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

# CV > 5% or passes differing by > 3% marks a result unstable; any rate above 0.97 x
# datasheet is cache residency or a byte-count bug; residuals beyond 15% call for a piecewise fit.
UNSTABLE_CV = 0.05
UNSTABLE_PASS_SPREAD = 0.03
CACHE_SUSPECT_DATASHEET_RATIO = 0.97
# A kernel that beats the streaming ceiling by this much is reading from cache, not DRAM.
CACHE_SUSPECT_COPY_RATIO = 1.05
PIECEWISE_RESIDUAL = 0.15
MIN_FIT_POINTS = 3


class FitError(ValueError):
    """The points cannot support a fit (too few sizes, or time does not grow with size)."""


@dataclass(frozen=True, slots=True)
class TimedPoint:
    """Per-call time at one size, with the spread of its samples."""

    bytes: int
    seconds: float
    coefficient_of_variation: float = 0.0
    pass_spread: float = 0.0
    working_set_bytes: int = 0
    # Fastest sample (STREAM's "best rate"); 0 when unknown.
    seconds_best: float = 0.0


@dataclass(frozen=True, slots=True)
class AffineFit:
    fixed_overhead_seconds: float
    bandwidth_bytes_per_s: float
    min_bytes: int
    points_used: int
    # (measured - predicted) / measured, in the order of the points used.
    relative_residuals: tuple[float, ...]
    r_squared: float
    # t0 came out negative (noise at large sizes) and was refitted through the origin.
    clamped: bool = False
    # Fewer than MIN_FIT_POINTS were >= min_bytes, so every point was used.
    small_size_only: bool = False

    @property
    def half_performance_bytes(self) -> float:
        """n_half = t0 * BW_eff: the size at which half of BW_eff is reached."""
        return self.fixed_overhead_seconds * self.bandwidth_bytes_per_s

    @property
    def max_abs_relative_residual(self) -> float:
        return max((abs(r) for r in self.relative_residuals), default=0.0)

    @property
    def median_abs_relative_residual(self) -> float:
        return statistics.median(abs(r) for r in self.relative_residuals)

    def predict_seconds(self, n_bytes: float) -> float:
        return self.fixed_overhead_seconds + n_bytes / self.bandwidth_bytes_per_s


def fit_affine(
    points: Sequence[TimedPoint], *, min_bytes: int, min_points: int = MIN_FIT_POINTS
) -> AffineFit:
    """Weighted least squares of t on bytes, weights 1/t^2, over points >= min_bytes."""
    valid = [p for p in points if p.bytes > 0 and p.seconds > 0 and math.isfinite(p.seconds)]
    used = [p for p in valid if p.bytes >= min_bytes]
    small_only = len(used) < min_points
    if small_only:
        used = valid
    if len({p.bytes for p in used}) < 2:
        raise FitError(
            f"need at least 2 distinct sizes to fit t = t0 + bytes/BW, got {len(used)} point(s); "
            "give the probe more time or a larger memory budget"
        )
    # Scale bytes to ~1 so the normal equations stay well conditioned at GiB sizes.
    scale = float(max(p.bytes for p in used))
    xs = [p.bytes / scale for p in used]
    ts = [p.seconds for p in used]
    ws = [1.0 / (t * t) for t in ts]
    s = sum(ws)
    sx = sum(w * x for w, x in zip(ws, xs, strict=True))
    st = sum(w * t for w, t in zip(ws, ts, strict=True))
    sxx = sum(w * x * x for w, x in zip(ws, xs, strict=True))
    sxt = sum(w * x * t for w, x, t in zip(ws, xs, ts, strict=True))
    det = s * sxx - sx * sx
    if det <= 0:
        raise FitError("sizes are degenerate: cannot separate t0 from bytes/BW")
    slope = (s * sxt - sx * st) / det
    intercept = (st - slope * sx) / s
    clamped = False
    if intercept < 0:
        # A negative fixed cost is unphysical; fit the proportional law instead and say so.
        clamped = True
        intercept = 0.0
        slope = sxt / sxx
    if slope <= 0:
        raise FitError(
            "time does not grow with size over the fitted points: the sizes are too small or "
            "cache-resident; raise the memory budget so buffers exceed the last-level cache"
        )
    preds = [intercept + slope * x for x in xs]
    residuals = tuple((t - p) / t for t, p in zip(ts, preds, strict=True))
    mean_t = st / s
    ss_res = sum(w * (t - p) ** 2 for w, t, p in zip(ws, ts, preds, strict=True))
    ss_tot = sum(w * (t - mean_t) ** 2 for w, t in zip(ws, ts, strict=True))
    r_squared = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return AffineFit(
        fixed_overhead_seconds=intercept,
        bandwidth_bytes_per_s=scale / slope,
        min_bytes=min(p.bytes for p in used),
        points_used=len(used),
        relative_residuals=residuals,
        r_squared=r_squared,
        clamped=clamped,
        small_size_only=small_only,
    )


def piecewise_fits(points: Sequence[TimedPoint], main: AffineFit) -> list[AffineFit]:
    """Below/above n_half fits, when the main fit misses some point by > 15%."""
    if main.max_abs_relative_residual <= PIECEWISE_RESIDUAL:
        return []
    split = main.half_performance_bytes
    used = [p for p in points if p.bytes >= main.min_bytes]
    parts = ([p for p in used if p.bytes < split], [p for p in used if p.bytes >= split])
    # A split with one side empty would just repeat the main fit.
    if any(len({p.bytes for p in part}) < 2 for part in parts):
        return []
    try:
        return [fit_affine(part, min_bytes=0, min_points=2) for part in parts]
    except FitError:
        return []


@dataclass(frozen=True, slots=True)
class Assessment:
    """Ratios and flags for a decode fit against the copy ceiling and the datasheet."""

    decode_to_copy_ratio: float | None
    decode_to_datasheet_ratio: float | None
    copy_to_datasheet_ratio: float | None
    flags: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())


def assess(
    fit: AffineFit,
    decode_points: Sequence[TimedPoint],
    *,
    copy_bandwidth_bytes_per_s: float,
    copy_points: Sequence[TimedPoint] = (),
    datasheet_bandwidth_bytes_per_s: float | None = None,
    cache_bytes: int = 0,
    resident_factor: int = 4,
) -> Assessment:
    """Flag cache residency, instability and small-size-only fits; compute the ratios.

    `cache_bytes` is the last-level cache; a point whose working set is below
    `resident_factor * cache_bytes` may be served from cache rather than memory.
    """
    flags: list[str] = []
    notes: list[str] = []
    ds = datasheet_bandwidth_bytes_per_s
    fitted = [p for p in decode_points if p.bytes >= fit.min_bytes]
    everything = [*fitted, *copy_points]

    reasons: list[str] = []
    if ds:
        fast = [p for p in everything if p.bytes / p.seconds > CACHE_SUSPECT_DATASHEET_RATIO * ds]
        if fast:
            reasons.append(f"{len(fast)} point(s) ran above 0.97 x the datasheet bandwidth")
    if fit.bandwidth_bytes_per_s > CACHE_SUSPECT_COPY_RATIO * copy_bandwidth_bytes_per_s:
        reasons.append("the decode fit beats the streaming copy ceiling")
    if cache_bytes:
        small = [p for p in everything if 0 < p.working_set_bytes < resident_factor * cache_bytes]
        if small:
            reasons.append(
                f"{len(small)} point(s) have a working set under {resident_factor} x the "
                f"last-level cache ({cache_bytes} bytes)"
            )
    if reasons:
        flags.append("cache_resident_suspect")
        notes.append("cache_resident_suspect: " + "; ".join(reasons))

    cvs = [p.coefficient_of_variation for p in everything]
    spreads = [p.pass_spread for p in everything]
    if cvs and (
        statistics.median(cvs) > UNSTABLE_CV or statistics.median(spreads) > UNSTABLE_PASS_SPREAD
    ):
        flags.append("unstable")
        notes.append(
            f"unstable: median CV {statistics.median(cvs):.1%} (limit 5%), median pass spread "
            f"{statistics.median(spreads):.1%} (limit 3%)"
        )
    if fit.small_size_only:
        flags.append("small_size_only")
        notes.append(
            f"small_size_only: fewer than {MIN_FIT_POINTS} sizes reached the fit's minimum, "
            "so all sizes were fitted; do not extrapolate BW_eff below the smallest size"
        )
    if fit.clamped:
        flags.append("t0_clamped")
        notes.append("t0_clamped: the fitted fixed cost was negative and was set to 0")
    if fit.max_abs_relative_residual > PIECEWISE_RESIDUAL:
        flags.append("poor_fit")
        notes.append(
            f"poor_fit: max relative residual {fit.max_abs_relative_residual:.1%} "
            "(> 15%); see the piecewise fits"
        )
    return Assessment(
        decode_to_copy_ratio=fit.bandwidth_bytes_per_s / copy_bandwidth_bytes_per_s,
        decode_to_datasheet_ratio=fit.bandwidth_bytes_per_s / ds if ds else None,
        copy_to_datasheet_ratio=copy_bandwidth_bytes_per_s / ds if ds else None,
        flags=tuple(flags),
        notes=tuple(notes),
    )


def ceiling(points: Sequence[TimedPoint], *, asymptotic_bytes: int) -> tuple[float, float, bool]:
    """Streaming ceiling from read points: (median rate, best rate, only_small_sizes).

    The median over sizes at or above `asymptotic_bytes` is the planning figure; the best
    (min-time) rate is the STREAM/BabelStream-comparable one. With no such size, the largest
    size stands in and the third value says so.
    """
    if not points:
        raise FitError("no copy-ceiling points were measured; give the probe more time")
    big = [p for p in points if p.working_set_bytes >= asymptotic_bytes]
    small_only = not big
    if small_only:
        big = [max(points, key=lambda p: p.bytes)]
    rates = [p.bytes / p.seconds for p in big]
    best = [p.bytes / (p.seconds_best or p.seconds) for p in big]
    return statistics.median(rates), max(best), small_only
