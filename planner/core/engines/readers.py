"""Each engine's log reader, beside the registry of its rules (`registry`): a reader recomputes
every figure a start-up log prints by asking that engine, at the logged release, the rules
plan() asks. Readers import the reconcile machinery; the rules never import a reader.
"""

from __future__ import annotations

from collections.abc import Callable

from planner.core.engines.base import Engine
from planner.core.engines.sglang import Sglang
from planner.core.engines.sglang.reconcile import reconcile_sglang
from planner.core.engines.trtllm import Trtllm
from planner.core.engines.trtllm.reconcile import reconcile_trtllm
from planner.core.engines.vllm import Vllm
from planner.core.engines.vllm.reconcile import reconcile_vllm
from planner.core.errors import FieldError
from planner.core.reconcile_common import Ctx

Reader = Callable[[Ctx], str]  # appends checks, notes and reserves; returns the log format

READERS: dict[type[Engine], Reader] = {
    Vllm: reconcile_vllm,
    Sglang: reconcile_sglang,
    Trtllm: reconcile_trtllm,
}


# Readers that recompute from the log's request resolved as plan() resolves it (`Ctx.inputs`).
READS_INPUTS: tuple[type[Engine], ...] = (Vllm,)


def reads_inputs(engine: Engine) -> bool:
    """Whether the engine's reader takes the log's resolved request (`Ctx.inputs`)."""
    return isinstance(engine, READS_INPUTS)


def read_log(ctx: Ctx) -> str:
    """Check every logged figure of `ctx` with its engine's reader."""
    for cls, reader in READERS.items():
        if isinstance(ctx.engine, cls):
            return reader(ctx)
    raise FieldError("engine", "engine.logs_unread", label=ctx.engine.label)


__all__ = ["READERS", "READS_INPUTS", "Reader", "read_log", "reads_inputs"]
