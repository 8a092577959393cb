"""Chart geometry for server-side SVG: rectangles and labels in viewBox units, no styling.

Colours come from CSS classes in `static/page.css` (the CSP forbids inline styles); the
templates turn a `Chart` into `<svg>` with autoescaped text, so no label can inject markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 400
TOP_PADDING = 18  # room for the value label above the tallest column
AXIS_HEIGHT = 18  # room for the tick labels under the baseline


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


@dataclass(frozen=True, slots=True)
class Chart:
    width: int
    height: int
    rects: tuple[Rect, ...]
    labels: tuple[Label, ...]
    baseline_y: float | None = None


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


def columns(cols: Sequence[Column], plot_height: int = 150) -> Chart:
    """Vertical (stacked) columns with a value above each and a tick label below."""
    n = max(len(cols), 1)
    slot = WIDTH / n
    bar_width = slot * 0.68
    top = max((sum(p.value for p in c.parts) for c in cols), default=0.0)
    scale = plot_height / top if top > 0 else 0.0
    base = TOP_PADDING + plot_height
    rects: list[Rect] = []
    labels: list[Label] = []
    for i, col in enumerate(cols):
        x = i * slot + (slot - bar_width) / 2
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
        centre = _r(i * slot + slot / 2)
        labels.append(Label(centre, _r(y - 4), col.top_label, "value" + state))
        labels.append(Label(centre, base + 14, col.tick, "tick" + state))
    return Chart(WIDTH, int(base + AXIS_HEIGHT), tuple(rects), tuple(labels), baseline_y=base)


def tokens_tick(tokens: int) -> str:
    """Axis label for a context length: 8192 → `8k`, 1048576 → `1M` (binary k, as in "8k")."""
    if tokens % (1 << 20) == 0:
        return f"{tokens >> 20}M"
    if tokens % 1024 == 0:
        return f"{tokens >> 10}k"
    return f"{tokens:,}"
