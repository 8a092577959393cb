"""The one list of engines: names, labels and versions. Adding an engine is one module plus one
line here."""

from __future__ import annotations

from functools import lru_cache

from planner.core.engines.base import Engine
from planner.core.engines.sglang import Sglang
from planner.core.engines.transformers import Transformers
from planner.core.engines.trtllm import Trtllm
from planner.core.engines.vllm import Vllm
from planner.core.errors import FieldError

ENGINES: dict[str, type[Engine]] = {
    cls.name: cls for cls in (Vllm, Sglang, Trtllm, Transformers)
}  # fmt: skip
DEFAULT_ENGINE = "vllm"


def engine_class(name: str) -> type[Engine]:
    try:
        return ENGINES[name]
    except KeyError:
        raise FieldError(
            "engine", "engine.unknown", name=name, engines=", ".join(ENGINES)
        ) from None


def get_engine(name: str, version: str | None = None) -> Engine:
    """The engine object for `name` at `version` (default: the newest verified release)."""
    cls = engine_class(name)  # an unknown (or unregistered) name is refused every time
    found = _engine(name, version)
    if type(found) is not cls:  # the registry changed under this name
        _engine.cache_clear()
        found = _engine(name, version)
    return found


@lru_cache(maxsize=256)
def _engine(name: str, version: str | None) -> Engine:
    # Engines are frozen: one object per engine and version text serves every plan.
    cls = engine_class(name)
    return cls(cls.releases.resolve(version, label=cls.label))


def engine_names() -> tuple[str, ...]:
    return tuple(ENGINES)


def serving_engines() -> tuple[str, ...]:
    """Engines with a launch command (what recommend can configure)."""
    return tuple(name for name, cls in ENGINES.items() if cls.serves)


def log_engines() -> tuple[str, ...]:
    """Engines whose start-up logs kvplan reads."""
    return tuple(name for name, cls in ENGINES.items() if cls.reads_logs)


def flag_engines() -> tuple[str, ...]:
    """Engines that take SGLang's start-up flags (the page shows those fields with them)."""
    return tuple(name for name, cls in ENGINES.items() if cls.takes_sglang_flags)


def engine_labels() -> dict[str, str]:
    return {name: cls.label for name, cls in ENGINES.items()}


def register(cls: type[Engine]) -> type[Engine]:
    """Add an engine (tests add a toy fifth one this way)."""
    ENGINES[cls.name] = cls
    _engine.cache_clear()
    return cls


__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "engine_class",
    "engine_labels",
    "engine_names",
    "flag_engines",
    "get_engine",
    "log_engines",
    "register",
    "serving_engines",
]
