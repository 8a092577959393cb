"""Chart geometry for server-side SVG: rectangles and labels in viewBox units, no styling.

Colours come from CSS classes in `static/page.css` (the CSP forbids inline styles); the
templates turn a `Chart` into `<svg>` with autoescaped text, so no label can inject markup.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

WIDTH = 400
TOP_PADDING = 18  # room for the value label above the tallest column
AXIS_HEIGHT = 18  # room for the tick labels under the baseline
Y_GUTTER = 40  # room for the y-axis labels left of the plot
SUB_TICK_HEIGHT = 14  # a second line of tick labels


@dataclass(frozen=True, slots=True)
class Rect:
    x: float
    y: float
    width: float
    height: float
    cls: str
    title: str


@dataclass(frozen=True, slots=True)
class Label:
    x: float
    y: float
    text: str
    cls: str = ""
    anchor: str = "middle"
    # `data-*` attributes (name, value): what the label stands for, machine-readable.
    data: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Chart:
    width: int
    height: int
    rects: tuple[Rect, ...]
    labels: tuple[Label, ...]
    baseline_y: float | None = None
    grid_y: tuple[float, ...] = ()
    plot_x: float = 0


@dataclass(frozen=True, slots=True)
class Part:
    """One stacked piece: CSS class suffix, value, and the tooltip text."""

    cls: str
    value: float
    title: str


@dataclass(frozen=True, slots=True)
class Column:
    tick: str
    parts: tuple[Part, ...]
    top_label: str
    highlight: bool = False
    muted: bool = False
    # A second line under the tick (the decode chart's batch), shown, not only in a tooltip.
    sub_tick: str = ""
    data: tuple[tuple[str, str], ...] = ()


def _r(value: float) -> float:
    return round(value, 2)


def stacked_bar(parts: Sequence[Part], total: float, height: int = 36) -> Chart:
    """One horizontal bar split into parts, left to right, scaled to `total`."""
    rects: list[Rect] = []
    x = 0.0
    scale = WIDTH / total if total > 0 else 0.0
    for part in parts:
        width = part.value * scale
        if width <= 0:
            continue
        rects.append(Rect(_r(x), 0, _r(width), height, f"seg-{part.cls}", part.title))
        x += width
    return Chart(WIDTH, height, tuple(rects), ())


def nice_ticks(top: float, count: int = 4) -> list[float]:
    """Round y-axis values from 0 up to at least `top`: steps of 1, 2 or 5 × 10^k."""
    if top <= 0:
        return [0.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    n = math.ceil(top / step - 1e-9)
    return [i * step for i in range(n + 1)]


def columns(
    cols: Sequence[Column],
    plot_height: int = 150,
    y_label: Callable[[float], str] | None = None,
) -> Chart:
    """Vertical (stacked) columns with a value above each, a tick label below, and a y-axis
    (gridlines at round values, labelled by `y_label`) in a gutter on the left."""
    gutter = Y_GUTTER if y_label else 0
    n = max(len(cols), 1)
    slot = (WIDTH - gutter) / n
    bar_width = slot * 0.68
    top = max((sum(p.value for p in c.parts) for c in cols), default=0.0)
    ticks = nice_ticks(top) if y_label else []
    axis_top = max(top, ticks[-1] if ticks else 0.0)
    scale = plot_height / axis_top if axis_top > 0 else 0.0
    base = TOP_PADDING + plot_height
    rects: list[Rect] = []
    labels: list[Label] = []
    grid: list[float] = []
    if y_label is not None:
        for value in ticks:
            at = _r(base - value * scale)
            grid.append(at)
            labels.append(Label(gutter - 4, _r(at + 3.5), y_label(value), "ytick", "end"))
    for i, col in enumerate(cols):
        x = gutter + i * slot + (slot - bar_width) / 2
        y: float = base
        state = " is-current" if col.highlight else " is-muted" if col.muted else ""
        for part in col.parts:
            h = part.value * scale
            if h <= 0:
                continue
            y -= h
            rects.append(
                Rect(_r(x), _r(y), _r(bar_width), _r(h), f"col-{part.cls}{state}", part.title)
            )
        centre = _r(gutter + i * slot + slot / 2)
        labels.append(Label(centre, _r(y - 4), col.top_label, "value" + state, data=col.data))
        labels.append(Label(centre, base + 14, col.tick, "tick" + state))
        if col.sub_tick:
            labels.append(Label(centre, base + 28, col.sub_tick, "tick sub" + state))
    extra = SUB_TICK_HEIGHT if any(c.sub_tick for c in cols) else 0
    return Chart(
        WIDTH,
        int(base + AXIS_HEIGHT + extra),
        tuple(rects),
        tuple(labels),
        baseline_y=base,
        grid_y=tuple(grid),
        plot_x=gutter,
    )


def tokens_tick(tokens: int) -> str:
    """Axis label for a context length: 8192 → `8k`, 1048576 → `1M` (binary k, as in "8k")."""
    if tokens % (1 << 20) == 0:
        return f"{tokens >> 20}M"
    if tokens % 1024 == 0:
        return f"{tokens >> 10}k"
    return f"{tokens:,}"
