"""Each engine's rule for the KV cache dtype a checkpoint declares (planner.core.kv_declared):
the dtype the engine runs instead of the one asked, by engine and release."""

from __future__ import annotations

from collections.abc import Callable

from planner.core.engines.base import Engine
from planner.core.engines.sglang.kv_checkpoint import checkpoint_kv_dtype as sglang_kv
from planner.core.engines.versions import Version
from planner.core.engines.vllm.kv_checkpoint import checkpoint_kv_dtype as vllm_kv
from planner.core.model import ModelShape

Rule = Callable[[Version, ModelShape, bool], str | None]
RULES: dict[str, Rule] = {"vllm": vllm_kv, "sglang": sglang_kv}  # TensorRT-LLM: none read


def checkpoint_kv_dtype(engine: Engine, shape: ModelShape, explicit: bool) -> str | None:
    """The KV cache dtype `engine` runs for this checkpoint instead of the one asked
    (`explicit`: a kv_cache_dtype other than auto), None where it runs the one asked."""
    rule = RULES.get(engine.name)
    return rule(engine.version, shape, explicit) if rule and shape.kv_declared else None


__all__ = ["checkpoint_kv_dtype"]
