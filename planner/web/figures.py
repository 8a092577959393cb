"""The page's three charts and their legends, in the user's language.

Memory per GPU (weights / reserve / KV in use / paging waste / free), max requests vs context
length, and the decode-step floor vs context (weights part and KV part).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from planner.core.schema import Plan, SweepPointOut
from planner.web.charts import (
    WIDTH,
    Chart,
    Column,
    Part,
    Rect,
    columns,
    stacked_bar,
    tokens_tick,
)
from planner.web.i18n import Numbers
from planner.web.view import MemoryView

Gettext = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class LegendItem:
    cls: str
    label: str
    value: str
    # A character shown in place of a colour swatch (a mark the chart prints, e.g. "—").
    mark: str = ""


@dataclass(frozen=True, slots=True)
class Figure:
    chart: Chart
    legend: tuple[LegendItem, ...]


def segment_labels(_: Gettext) -> dict[str, str]:
    return {
        "weights": _("Weights"),
        "reserve": _("Activations and runtime reserve"),
        "activation": _("Activation peak (profile run)"),
        "non_torch": _("Non-torch memory (CUDA context, NCCL)"),
        "cuda_graphs": _("CUDA graphs"),
        "kv_used": _("KV cache in use"),
        "waste": _("Paging waste"),
        "kv_free": _("Free KV blocks"),
        "kv_short": _("KV cache: the engine's figure, below zero"),
        "unallocated": _("Not given to the engine (1 − utilization)"),
    }


def memory_figure(view: MemoryView, fmt: Numbers, _: Gettext) -> Figure:
    """The GPU's memory as one bar. Over-full (the parts above zero add up to more than the
    GPU), the bar is scaled to them and a mark stands where the GPU's memory ends."""
    labels = segment_labels(_)
    parts = [Part(s.key, s.bytes, f"{labels[s.key]}: {fmt.gib(s.bytes)}") for s in view.segments]
    legend = [LegendItem(f"seg-{s.key}", labels[s.key], fmt.gib(s.bytes)) for s in view.segments]
    drawn = sum(max(0, s.bytes) for s in view.segments)
    chart = stacked_bar(parts, max(drawn, view.total_bytes))
    if drawn > view.total_bytes:
        at = WIDTH * view.total_bytes / drawn
        title = _("The GPU's memory ends here: %(gib)s") % {"gib": fmt.gib(view.total_bytes)}
        mark = Rect(round(at - 1.5, 2), 0, 3, chart.height, "overflow-mark", title)
        chart = replace(chart, rects=(*chart.rects, mark))
        legend.append(
            LegendItem(
                "overflow-mark", _("Past the GPU's memory"), fmt.gib(drawn - view.total_bytes)
            )
        )
    return Figure(chart, tuple(legend))


def capacity_figure(
    points: list[tuple[int, int]], current_tokens: int, fmt: Numbers, _: Gettext
) -> Figure | None:
    if len(points) < 2:
        return None
    cols = [
        Column(
            tokens_tick(ctx),
            (
                Part(
                    "req",
                    n,
                    _("%(n)s requests of %(ctx)s tokens") % {"n": fmt.num(n), "ctx": fmt.num(ctx)},
                ),
            ),
            fmt.num(n),
            highlight=ctx == current_tokens,
        )
        for ctx, n in points
    ]
    legend = (
        LegendItem("col-req", _("Requests that fit"), ""),
        LegendItem("col-req is-current", _("Your context length"), fmt.num(current_tokens)),
    )
    return Figure(columns(cols, y_label=lambda v: fmt.num(round(v))), legend)


def _short_ms(seconds: float) -> str:
    value = seconds * 1e3
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _column_seconds(
    plan: Plan, point: SweepPointOut, plans: Mapping[int, Plan], per_length: bool
) -> tuple[int, float, float]:
    """(batch, KV read, weights read) of one decode column. Per length, the plan at that
    length itself (MoE: the experts a batch touches depend on its size, so the weights term
    is that plan's, not the answer's); with a workload, the sweep's point at its batch."""
    if not per_length:
        assert plan.bounds is not None
        return plan.bounds.batch_requests, point.kv_read_seconds, point.weights_read_seconds
    found = plans.get(point.context_tokens)
    if (
        found is None
        or found.bounds is None
        or found.capacity is None
        or found.capacity.max_running_requests == 0
    ):
        return 0, 0.0, 0.0
    b = found.bounds
    return b.batch_requests, b.kv_read_seconds, b.weights_read_seconds


def decode_figure(plan: Plan, plans: Mapping[int, Plan], fmt: Numbers, _: Gettext) -> Figure | None:
    """Decode-step floor per context length. Without a workload each column is the plan at
    that length (`plans`, by context): its batch is as many as run at that length, so no
    column shows a step for a batch that cannot be in memory. With a workload every column
    decodes the workload's batch (the core's sweep), muted where that batch would not fit."""
    bounds = plan.bounds
    if bounds is None or len(bounds.context_sweep) < 2:
        return None
    batch = bounds.batch_requests
    cap = plan.capacity
    current = cap.context_tokens if cap else None
    per_length = cap is not None and cap.workload_fits is None and bool(plans)
    cols = []
    for point in bounds.context_sweep:
        ctx = point.context_tokens
        n, kv, weights = _column_seconds(plan, point, plans, per_length)
        found = plans.get(ctx)
        fits = found.capacity.max_requests if found and found.capacity else None
        title = ngettext_batch(_, n, fmt)
        cols.append(
            Column(
                tokens_tick(ctx),
                (
                    Part(
                        "weights",
                        weights,
                        _("Weights read: %(t)s") % {"t": fmt.ms(weights)} + title,
                    ),
                    Part("kv", kv, _("KV read: %(t)s") % {"t": fmt.ms(kv)} + title),
                ),
                _short_ms(kv + weights) if n > 0 else "—",
                highlight=ctx == current,
                muted=not per_length and fits is not None and fits < batch,
                sub_tick="×" + fmt.num(n) if n > 0 else "",
                data=(
                    ("context-tokens", str(ctx)),
                    ("batch-requests", str(n)),
                    ("step-seconds", repr(kv + weights) if n > 0 else ""),
                ),
            )
        )
    legend = [
        LegendItem("col-weights", _("Reading the weights"), ""),
        LegendItem("col-kv", _("Reading the KV cache"), ""),
    ]
    if any(c.highlight for c in cols) and current is not None:
        legend.append(LegendItem("col-kv is-current", _("Your context length"), fmt.num(current)))
    if any(c.muted for c in cols):
        legend.append(LegendItem("col-kv is-muted", _("This batch would not fit in memory"), ""))
    legend.append(LegendItem("", _("×N under a column: the batch decoded at that length"), "", "×"))
    if any(c.top_label == "—" for c in cols):
        legend.append(LegendItem("", _("No request of that length fits"), "", "—"))
    top_ms = max((sum(p.value for p in c.parts) for c in cols), default=0.0) * 1e3
    digits = 0 if top_ms >= 10 else 1 if top_ms >= 1 else 2  # one precision for the whole axis
    return Figure(columns(cols, y_label=lambda v: fmt.dec(v * 1e3, digits)), tuple(legend))


def ngettext_batch(_: Gettext, n: int, fmt: Numbers) -> str:
    """` (batch of N)` for a column's tooltip."""
    return " · " + _("batch of %(num)s") % {"num": fmt.num(n)}
