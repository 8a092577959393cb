"""What every engine's reconciler shares: the resolved inputs, and how a check is judged.

A check puts one logged figure beside kvplan's recomputation of it:
  equal       the recomputed figure, printed at the log's precision, is the logged one;
  consistent  not equal, but inside what the log's display rounding admits (a GiB printed with
              two decimals is ±0.005 GiB, so a range of block counts);
  different   outside that range; `reason` says why when a known cause reproduces it;
  not_recomputable  the log lacks an input; `reason` says which, and no number is invented.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from planner.core.engines import Engine
from planner.core.engines.reads import PlanInputs
from planner.core.errors import Message, PlanError
from planner.core.logs import Fact, ParsedLog, half_unit, to_float
from planner.core.model import ModelShape
from planner.core.notes import Notes
from planner.core.parallel import stage_layer_specs
from planner.core.reconcile_schema import Check, MessageOut, Reserves, SettingUsed, Status
from planner.core.specs import (
    FullAttentionSpec,
    LayerSpec,
    MLASpec,
    Stack,
    stack_of,
)
from planner.core.speculative import with_draft
from planner.core.units import GiB, KVDtype

Range = tuple[float, float]


@dataclass
class Resolved:
    """Settings after request > log > default, with where each came from."""

    tp: int = 1
    pp: int = 1
    partition: list[int] | None = None
    block: int = 16
    dtype_name: str = "auto"
    max_model_len: int | None = None
    mnbt: int = 8192  # tokens in flight for window admission (max_num_batched_tokens × batches)
    max_num_batched_tokens: int = 8192
    memory_fraction: float | None = None
    hybrid: bool = True
    draft: int = 0
    speculative: dict[str, Any] | None = None  # the speculative_config given, for the plan body
    swap_bytes: int = 4 * GiB
    gpu_id: str | None = None
    gpu_memory_bytes: int | None = None
    vllm_gen: str = "v1"
    used: list[SettingUsed] = field(default_factory=list)

    def note(self, name: str, value: Any, source: str) -> None:
        self.used.append(
            SettingUsed.model_validate({"name": name, "value": str(value), "source": source})
        )


@dataclass
class Ctx:
    engine: Engine
    log: ParsedLog
    facts: list[Fact]
    shape: ModelShape | None
    model_ref: str | dict[str, Any] | None
    model_label: str | None
    no_model_reason: Message | str
    dtype: KVDtype | None
    settings: Resolved
    notes: Notes = field(default_factory=Notes)
    checks: list[Check] = field(default_factory=list)
    reserves: Reserves | None = None
    plan_extra: dict[str, Any] = field(default_factory=dict)
    # The log's request resolved as plan() resolves it (`reconcile_request.log_inputs`), and
    # why not when the release's rules refuse it.
    inputs: PlanInputs | None = None
    inputs_reason: Message | str = ""

    def of(self, kind: str) -> list[Fact]:
        return [f for f in self.facts if f.kind == kind]

    def first(self, kind: str) -> Fact | None:
        found = self.of(kind)
        return found[0] if found else None


# ---------------------------------------------------------------------------------------------
# Formatting


def n(value: float) -> str:
    """Thousands separators for integers, trimmed decimals otherwise."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.4f}".rstrip("0").rstrip(".")


def gib(n_bytes: float, digits: int = 2) -> str:
    return f"{n_bytes / GiB:.{digits}f} GiB"


def gib_bounds(text: str) -> tuple[int, int, int]:
    """A GiB figure as printed → (low, value, high) bytes its display rounding admits."""
    value = to_float(text)
    h = half_unit(text)
    return (
        max(0, math.ceil((value - h) * GiB)),
        round(value * GiB),
        math.floor((value + h) * GiB),
    )


def display_equal(predicted: float, text: str) -> bool:
    """Whether `predicted`, printed with the digits of `text`, is `text`."""
    return abs(predicted - to_float(text)) <= half_unit(text) + 1e-9


# ---------------------------------------------------------------------------------------------
# Stacks per rank and stage


def rank_spec(spec: LayerSpec, engine: Engine, tp: int) -> LayerSpec:
    return engine.rank_spec(spec, tp)


def stage_layers(
    shape: ModelShape,
    engine: Engine,
    tp: int,
    stage_sizes: Sequence[int],
    draft: int,
) -> list[tuple[LayerSpec, ...]]:
    """Per pipeline stage: the per-rank cache specs in layer order, as plan() splits them
    (`parallel.stage_layer_specs`, vLLM groups layers by index across the whole model, so
    order matters). Draft layers (the shape's own, from a speculative config, and `draft`
    more full-attention ones, a reading of the log) join the last stage."""
    if draft:
        main = next(
            (s for s in shape.layers if not s.is_window and s.grows_with_context),
            shape.layers[0],
        )
        full: LayerSpec = (
            main
            if isinstance(main, MLASpec)
            else FullAttentionSpec(main.kv_heads, main.head_size, main.head_size_v)
        )
        shape = with_draft(shape, (*shape.draft_layers, *[full] * draft))
    return stage_layer_specs(shape, engine, tp, len(stage_sizes), stage_sizes)


def stage_stacks(
    shape: ModelShape,
    engine: Engine,
    tp: int,
    stage_sizes: Sequence[int],
    draft: int,
) -> list[Stack]:
    """Per pipeline stage: the per-rank layer stack, (spec, count) pairs."""
    return [stack_of(st) for st in stage_layers(shape, engine, tp, stage_sizes, draft)]


def whole_stack(ctx: Ctx, tp: int | None = None) -> Stack:
    """The per-rank stack of all layers (one stage), draft layers included."""
    assert ctx.shape is not None
    sizes = [ctx.shape.num_hidden_layers]
    return stage_stacks(ctx.shape, ctx.engine, tp or ctx.settings.tp, sizes, ctx.settings.draft)[0]


# ---------------------------------------------------------------------------------------------
# Judging one figure


@dataclass(frozen=True)
class Variant:
    """An alternative reading of the deployment, tried when a figure differs."""

    reason: Message
    figure: Callable[[], Range | None]  # the figure's admitted range under this reading


def const(value: Range | None) -> Callable[[], Range | None]:
    """A variant's figure that is already computed."""
    return lambda: value


@dataclass(frozen=True)
class Figure:
    """What a check is about: its id in `Check.figure`, its label as the log words it, its unit."""

    name: str
    label: str
    unit: str


def judge(
    ctx: Ctx,
    about: Figure,
    fact: Fact,
    logged: float,
    *,
    predicted: float | None = None,
    admitted: Range | None = None,
    arithmetic: str = "",
    blocks_range: tuple[int, int] | None = None,
    equal: bool | None = None,
    reason: Message | str | None = None,
    variants: Sequence[Variant] = (),
    likely: Message | None = None,
) -> Check:
    """Build one check. Without `predicted` the figure is not recomputable: `reason` says why
    (default: the context's no-model reason). `equal` overrides the exact comparison (display
    precision); `variants` are tried, in order, to explain a difference; `likely` is a cause
    that cannot be checked numerically."""
    status: Status
    diff = pct = None
    if predicted is None:
        status = "not_recomputable"
        if reason is None:
            reason = ctx.no_model_reason
    else:
        is_equal = equal if equal is not None else logged == predicted
        diff = logged - predicted
        pct = round(100.0 * diff / predicted, 3) if predicted else None
        if is_equal:
            status, reason = "equal", None
        elif admitted is not None and admitted[0] <= logged <= admitted[1]:
            status, reason = "consistent", None
        else:
            status = "different"
            reason = reason or _explain(logged, variants) or likely
    check = Check(
        figure=about.name,
        label=about.label,
        unit=about.unit,
        line=fact.line_no,
        logged=logged,
        predicted=predicted,
        predicted_range=[admitted[0], admitted[1]] if admitted is not None else None,
        blocks_range=[blocks_range[0], blocks_range[1]] if blocks_range is not None else None,
        status=status,
        difference=round(diff, 6) if diff is not None else None,
        difference_pct=pct,
        reason=reason.text if isinstance(reason, Message) else reason or None,
        reason_code=reason.code if isinstance(reason, Message) and reason else None,
        reason_params=reason.as_json() if isinstance(reason, Message) else None,
        arithmetic=arithmetic,
    )
    ctx.checks.append(check)
    return check


def judge_printed(
    ctx: Ctx,
    about: Figure,
    fact: Fact,
    text: str,
    predicted: float,
    *,
    arithmetic: str,
    admitted: Range | None = None,
    blocks_range: tuple[int, int] | None = None,
    variants: Sequence[Variant] = (),
) -> Check:
    """A figure the log prints with few digits (`text`): equal when `predicted`, printed with
    those digits, is `text`."""
    return judge(
        ctx,
        about,
        fact,
        to_float(text),
        predicted=round(predicted, 4),
        admitted=admitted,
        arithmetic=arithmetic,
        blocks_range=blocks_range,
        equal=display_equal(predicted, text),
        variants=variants,
    )


def _explain(logged: float, variants: Sequence[Variant]) -> Message | None:
    for v in variants:
        try:
            window = v.figure()
        except (PlanError, ArithmeticError, ValueError):
            continue  # a reading that cannot be built explains nothing
        if window is not None and window[0] <= logged <= window[1]:
            return v.reason
    return None


def set_reserves(
    ctx: Ctx,
    derivation: Sequence[Message],
    *,
    weights_rank: int | None = None,
    reserve: int | None = None,
    activation_peak: int | None = None,
    non_torch: int | None = None,
    cuda_graph: int | None = None,
    kv_budget: int | None = None,
) -> None:
    """What the log teaches about memory; figures it does not show stay None. Weights for the
    whole deployment are the per-rank figure on every rank (TP × PP)."""
    s = ctx.settings
    ctx.reserves = Reserves(
        weights_bytes=weights_rank * s.tp * s.pp if weights_rank is not None else None,
        weights_bytes_per_rank=weights_rank,
        reserve_bytes=reserve,
        activation_peak_bytes=activation_peak,
        non_torch_bytes=non_torch,
        cuda_graph_bytes=cuda_graph,
        kv_budget_bytes=kv_budget,
        derivation=[m.text for m in derivation],
        derivation_detail=[MessageOut(code=m.code, params=m.as_json()) for m in derivation],
    )


def unique_facts(facts: Sequence[Fact], key: str) -> list[Fact]:
    """One fact per distinct printed value (several ranks print the same line)."""
    seen: set[str] = set()
    out: list[Fact] = []
    for f in facts:
        value = f.values.get(key)
        if value is None or value in seen:
            continue
        seen.add(value)
        out.append(f)
    return out


__all__ = [
    "Ctx",
    "Figure",
    "Range",
    "Resolved",
    "Variant",
    "const",
    "display_equal",
    "gib",
    "gib_bounds",
    "judge",
    "judge_printed",
    "n",
    "rank_spec",
    "set_reserves",
    "stage_layers",
    "stage_stacks",
    "unique_facts",
    "whole_stack",
]
