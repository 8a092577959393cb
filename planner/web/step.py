"""The floor and the expected decode step side by side, as the CLI and the page print them:

    floor 9.1 ms · expected 15.8 ms: weights 9.0 · KV 0.1 · all-reduce 2.4 · fixed 4.3

The parts are the expected step's counted terms (the side of max(memory, compute) that wins,
communication, and the fixed costs together), so they add up to the expected step.
"""

from __future__ import annotations

from collections.abc import Callable

from planner.core.expected_schema import ExpectedOut

Gettext = Callable[[str], str]


def _same(text: str) -> str:
    return text


def term_labels(_: Gettext = _same) -> dict[str, str]:
    return {
        "weights_read": _("weights"),
        "kv_read": _("KV"),
        "matmul": _("matmul"),
        "attention": _("attention"),
        "all_reduce": _("all-reduce"),
        "pipeline_handoff": _("pipeline hand-off"),
        "draft_steps": _("draft"),
        "per_layer": _("fixed, per layer"),
        "per_step": _("fixed, per step and request"),
        "fixed": _("fixed"),
    }


def step_parts(e: ExpectedOut, _: Gettext = _same) -> list[tuple[str, float]]:
    """(label, seconds) of every counted term above zero; per-layer and per-step costs as one
    "fixed" part."""
    labels = term_labels(_)
    parts: list[tuple[str, float]] = []
    fixed = 0.0
    for t in e.terms:
        if not t.counted:
            continue
        if t.group == "fixed":
            fixed += t.seconds
        elif t.seconds > 0:
            parts.append((labels[t.code], t.seconds))
    if fixed > 0:
        parts.append((labels["fixed"], fixed))
    return parts


def _ms(seconds: float) -> str:
    value = seconds * 1e3
    return f"{value:.3f}" if value < 1 else f"{value:.1f}"


def step_summary(floor_seconds: float, e: ExpectedOut, _: Gettext = _same) -> str:
    """`floor 9.1 ms · expected 15.8 ms: weights 9.0 · KV 0.1 · all-reduce 2.4 · fixed 4.3`."""
    head = _("floor %(floor)s ms · expected %(expected)s ms") % {
        "floor": _ms(floor_seconds),
        "expected": _ms(e.decode_step_seconds),
    }
    parts = " · ".join(f"{label} {_ms(seconds)}" for label, seconds in step_parts(e, _))
    return f"{head}: {parts}" if parts else head


__all__ = ["step_parts", "step_summary", "term_labels"]
