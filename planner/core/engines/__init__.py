"""Engines as types: one object per engine and version (see `base.Engine`), one registry."""

from planner.core.engines.base import Engine, Scheduling
from planner.core.engines.registry import (
    DEFAULT_ENGINE,
    ENGINES,
    engine_class,
    engine_labels,
    engine_names,
    get_engine,
    log_engines,
    register,
    serving_engines,
)
from planner.core.engines.versions import Releases, Version, parse_version, version_text

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "Engine",
    "Releases",
    "Scheduling",
    "Version",
    "engine_class",
    "engine_labels",
    "engine_names",
    "get_engine",
    "log_engines",
    "parse_version",
    "register",
    "serving_engines",
    "version_text",
]
