"""Where the page's files are: a source checkout first, then the copies the wheel ships."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


def _find(checkout_name: str, wheel_name: str) -> Path:
    # pyproject force-includes `templates/` as `planner/_templates` (same for static).
    for candidate in (_PACKAGE.parent / checkout_name, _PACKAGE / wheel_name):
        if candidate.is_dir():
            return candidate
    raise RuntimeError(f"{checkout_name}/ not found next to the planner package; reinstall kvplan")


def templates_dir() -> Path:
    return _find("templates", "_templates")


def locale_dir() -> Path:
    return _PACKAGE / "locale"
