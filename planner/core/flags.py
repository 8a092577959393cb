"""Engine settings as ready-to-paste launch commands: each engine renders its own flags
(`Engine.launch`); this module names the model and maps KV dtypes."""

from __future__ import annotations

import re
import shlex
from typing import Any

from planner.core.engines import Engine
from planner.core.engines.base import EXTRA_OPTIONS_FILE
from planner.core.errors import FieldError
from planner.core.recommend_schema import EngineSettings

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-/]{0,199}")


def model_name(model: str | dict[str, Any]) -> str:
    """The name to launch: the catalog id, else the config's `_name_or_path` when it looks like
    a repo id or path, else a placeholder to replace."""
    if isinstance(model, str):
        return model
    name = model.get("_name_or_path")
    if isinstance(name, str) and _SAFE_NAME.fullmatch(name):
        return name
    return "MODEL"


def engine_dtype(engine: Engine, dtype: str, model_dtype: str) -> str:
    """kvplan's KV dtype name → the engine's flag value ('auto' when it is the model's own)."""
    key = dtype.strip().lower()
    if key in ("auto", model_dtype):
        return "auto"
    table = engine.launch_kv_dtypes
    if key not in table:
        raise FieldError(
            "kv_cache_dtype",
            "input.kv_dtype_not_recommendable",
            label=engine.label,
            dtype=dtype,
            names=", ".join(sorted(table)) or "none",
        )
    return table[key]


def render(
    engine: Engine, model: str, s: EngineSettings, instances: int
) -> tuple[str, dict[str, str]]:
    """(command line, extra files by name) for one launch of `instances` replicas."""
    return engine.launch(shlex.quote(model), s, instances)


__all__ = ["EXTRA_OPTIONS_FILE", "engine_dtype", "model_name", "render"]
