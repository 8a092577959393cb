"""What a request will cost, read from its shape alone, before any work is done.

The server admits a request only when its estimate fits the budget (`KVPLAN_MAX_REQUEST_COST`
work units, `KVPLAN_MAX_RESPONSE_BYTES` of answer), and runs it on the event loop only when the
estimate is tiny (`KVPLAN_INLINE_COST`); everything else goes to the worker pool, whose deadline
stops it. The estimate reads only sizes: layers, distinct attention windows, pipeline stages,
request entries, grid points. Nothing here parses a model config beyond counting. A Hub id
counts as the largest model accepted until the server has resolved it (off the event loop);
then its own config counts.

Work units are microseconds of CPU on the reference machine (one core of a 2-core development
box, Python 3.11). The coefficients come from timing `plan()` over a grid of shapes (layers
32..4096, stages 1..1024, windows 1..4096, request entries 1..256, vLLM and TensorRT-LLM) and are
rounded up, so the estimate is an upper bound of the same order there (`bench/cost_model.py`
re-measures the ratio per shape).
Answer bytes are an upper estimate of the JSON `plan()` produces for that shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from planner.core.schema import PlanRequest

# Work units (µs) of one plan, by term (see the module docstring for where they come from).
_BASE_UNITS = 100.0
_PER_LAYER = 2.5
_PER_LAYER_STAGE = 0.06
_PER_ENTRY_STAGE = 2.5
_PER_WINDOW_ENTRY = 4.5
_PER_WINDOW_LAYER = 0.006
_PER_WINDOW_STAGE = 0.4
# Bytes of one plan's JSON answer, by term.
_PLAN_BYTES = 5_000
_BYTES_PER_ENTRY = 120
_BYTES_PER_LAYER = 8
_BYTES_PER_WINDOW = 300
_BYTES_PER_STAGE = 8
# A sweep point's summary without its plan, and the page's extra HTML around one plan.
_SWEEP_POINT_BYTES = 400
_PAGE_BYTES = 64_000
# The page draws capacity at up to this many context lengths (one plan each) beside the answer.
PAGE_EXTRA_PLANS = 24
# Layers assumed when a config names none (the plan then fails at once, at the first check).
_UNKNOWN_LAYERS = 1
_MAX_LAYERS = 4096
# Distinct layer kinds assumed for a Hub model not yet resolved (full, sliding, state, ...).
_WORST_KINDS = 8


@dataclass(frozen=True, slots=True)
class Shape:
    """The sizes that drive one plan's work: everything else is constant time."""

    layers: int
    windows: int
    stages: int
    entries: int


@dataclass(frozen=True, slots=True)
class Cost:
    """An upper estimate: `work_units` (µs of CPU on the reference machine), `plans` run, and
    `response_bytes` of the answer."""

    work_units: int
    response_bytes: int
    plans: int

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.work_units + other.work_units,
            self.response_bytes + other.response_bytes,
            self.plans + other.plans,
        )

    def times(self, n: int) -> Cost:
        return Cost(self.work_units * n, self.response_bytes * n, self.plans * n)


def _int_in(value: object, lo: int, hi: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return min(max(value, lo), hi)


def _decoder_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    inner = config.get("text_config")
    return inner if isinstance(inner, Mapping) else config


def config_layers(config: Mapping[str, Any]) -> tuple[int, int]:
    """(layers, distinct layer kinds) a pasted config asks for, clamped to what is accepted."""
    cfg = _decoder_config(config)
    layers = _int_in(cfg.get("num_hidden_layers"), 1, _MAX_LAYERS)
    types = cfg.get("layer_types")
    kinds = 1
    if isinstance(types, list):
        layers = max(layers or 0, min(len(types), _MAX_LAYERS)) or None
        kinds = max(1, len({t for t in types[:_MAX_LAYERS] if isinstance(t, str)}))
    return layers or _UNKNOWN_LAYERS, kinds


def is_hub_id(model: object) -> bool:
    """A model id that is not in the bundled catalog but could be on the Hub: its size is
    unknown until the Hub is asked (which never happens on the event loop)."""
    return isinstance(model, str) and _is_hub_id(model)


# The catalog is static package data and the id rules are pure: what an id costs is read once
# per id (bounded), not per request.
@lru_cache(maxsize=4096)
def _is_hub_id(model: str) -> bool:
    from planner.catalog import find_model  # static package data, loaded once
    from planner.resolve import hub_id

    try:
        if find_model(model) is not None:
            return False
    except Exception:  # a refused catalog entry: the plan says why, at once
        return False
    return hub_id(model) is not None


def model_layers(
    model: str | Mapping[str, Any], known: tuple[int, int] | None = None
) -> tuple[int, int]:
    """(layers, distinct layer kinds) of a catalog id or a pasted config; `known` when the
    server resolved a Hub id. A Hub id not yet resolved counts as the largest model accepted."""
    if known is not None:
        return known
    if isinstance(model, Mapping):
        return config_layers(model)
    return _id_layers(model)


@lru_cache(maxsize=4096)
def _id_layers(model: str) -> tuple[int, int]:
    from planner.catalog import get_model  # static package data, loaded once

    try:
        entry = get_model(model)
    except Exception:  # an unknown id: the plan refuses it at once, unless the Hub has it
        return (_MAX_LAYERS, _WORST_KINDS) if is_hub_id(model) else (_UNKNOWN_LAYERS, 1)
    return config_layers(entry.config)


def needs_hub(request: PlanRequest) -> bool:
    """The plan reads a model (target or draft) from the Hub: it never runs on the loop."""
    spec = request.speculative_config
    draft = spec.model if spec is not None else None
    return is_hub_id(request.model) or is_hub_id(draft)


def plan_shape(
    request: PlanRequest,
    *,
    entries: int | None = None,
    windows: Sequence[int] | None = None,
    known: tuple[int, int] | None = None,
) -> Shape:
    """The shape of one plan of `request` (a sweep point overrides the request entries;
    `known` are the layers and kinds of the Hub model the server resolved)."""
    layers, kinds = model_layers(request.model, known)
    spec = request.speculative_config
    if spec is not None and is_hub_id(spec.model):
        layers = min(layers + _MAX_LAYERS, 2 * _MAX_LAYERS)  # the draft's layers, unknown yet
    window_list = windows if windows is not None else request.max_attention_window
    distinct = len(set(window_list)) if window_list else 1
    return Shape(
        layers=layers,
        windows=max(kinds, min(distinct, layers)),
        stages=request.pipeline_parallel_size,
        entries=entries if entries is not None else max(1, len(request.requests or ())),
    )


def shape_cost(shape: Shape, plans: int = 1) -> Cost:
    """The estimate for `plans` plans of one shape (answers counted once each)."""
    lay, win, stg, ent = shape.layers, shape.windows, shape.stages, shape.entries
    units = (
        _BASE_UNITS
        + _PER_LAYER * lay
        + _PER_LAYER_STAGE * lay * stg
        + _PER_ENTRY_STAGE * ent * stg
        + _PER_WINDOW_ENTRY * win * ent
        + _PER_WINDOW_LAYER * win * lay
        + _PER_WINDOW_STAGE * win * stg
    )
    answer = (
        _PLAN_BYTES
        + _BYTES_PER_ENTRY * ent
        + _BYTES_PER_LAYER * lay
        + _BYTES_PER_WINDOW * win
        + _BYTES_PER_STAGE * stg
    )
    return Cost(int(units) * plans, answer * plans, plans)


def plan_cost(request: PlanRequest, known: tuple[int, int] | None = None) -> Cost:
    return shape_cost(plan_shape(request, known=known))


def sweep_cost(
    base: PlanRequest,
    points: int,
    *,
    include_plans: bool,
    known: tuple[int, int] | None = None,
) -> Cost:
    """Every point is one plan of `base` with a single request entry."""
    one = shape_cost(plan_shape(base, entries=1, known=known))
    answer = _SWEEP_POINT_BYTES + (one.response_bytes if include_plans else 0)
    return Cost(one.work_units * points, answer * points, points)


def page_cost(request: PlanRequest) -> Cost:
    """The page's answer: the plan, plus one plan per point of its capacity chart."""
    main = plan_cost(request)
    chart = shape_cost(plan_shape(request), PAGE_EXTRA_PLANS)
    return Cost(
        main.work_units + chart.work_units, main.response_bytes + _PAGE_BYTES, 1 + chart.plans
    )


def recommend_cost(
    model: str | Mapping[str, Any],
    *,
    gpu_count: int,
    mix_classes: int,
    dtypes: int,
    known: tuple[int, int] | None = None,
) -> Cost:
    """The search plans each KV dtype × power-of-two TP size, each at every mix length plus
    a few what-ifs; every plan has one entry per mix class."""
    layers, kinds = model_layers(model, known)
    tp_sizes = max(1, gpu_count.bit_length())
    plans = dtypes * tp_sizes * (mix_classes + 4)
    one = shape_cost(Shape(layers=layers, windows=kinds, stages=1, entries=max(1, mix_classes)))
    return Cost(one.work_units * plans, 64_000 + 400 * plans, plans)


@dataclass(frozen=True, slots=True)
class Budget:
    """The admission limits (from `planner.settings`)."""

    max_work_units: int
    max_response_bytes: int
    inline_work_units: int

    def refusal(self, cost: Cost) -> str | None:
        """Why `cost` is over budget (naming the limit and its setting), or None."""
        if cost.work_units > self.max_work_units:
            return (
                f"this request would take about {cost.work_units:,} work units (≈ µs of CPU; "
                f"{cost.plans:,} plans), over the limit of {self.max_work_units:,} "
                "(KVPLAN_MAX_REQUEST_COST); ask for fewer layers, windows, pipeline stages, "
                "request entries or sweep points"
            )
        if cost.response_bytes > self.max_response_bytes:
            return (
                f"the answer would be about {cost.response_bytes:,} bytes, over the limit of "
                f"{self.max_response_bytes:,} (KVPLAN_MAX_RESPONSE_BYTES); ask for fewer points "
                "or leave include_plans off"
            )
        return None

    def inline(self, cost: Cost) -> bool:
        """Cheap enough to run on the event loop: a thread or process hop would cost more."""
        return cost.work_units <= self.inline_work_units


__all__ = [
    "PAGE_EXTRA_PLANS",
    "Budget",
    "Cost",
    "Shape",
    "config_layers",
    "is_hub_id",
    "model_layers",
    "needs_hub",
    "page_cost",
    "plan_cost",
    "plan_shape",
    "recommend_cost",
    "shape_cost",
    "sweep_cost",
]
