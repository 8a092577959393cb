"""The engines sit below what reads them: no import loop runs through planner/core/engines,
counting imports made for type checking only and the package faces a submodule import runs."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINES = "planner.core.engines"


def _modules() -> dict[str, Path]:
    out = {}
    for path in (ROOT / "planner" / "core").rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """Core modules `name` imports anywhere (type-only ones and those in functions too), with
    the packages above each: importing a.b.c runs a/__init__ and a/b/__init__."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[: len(package) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            subs = [f"{base}.{a.name}" for a in node.names]
            targets = [sub if sub in mods else base for sub in subs]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        for t in targets:
            while t and t not in mods:
                t = t.rpartition(".")[0]
            while t.startswith("planner.core"):
                if t in mods and t != name and t != "planner.core":
                    found.add(t)
                t = t.rpartition(".")[0]
    return found


def _reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_no_import_loop_runs_through_the_engines() -> None:
    mods = _modules()
    graph = {name: _imports(name, path, mods) for name, path in mods.items()}
    loops = []
    for name in graph:
        if name == ENGINES or name.startswith(ENGINES + "."):
            # A submodule's own package faces (whose __init__ imports it) are not a loop.
            back = {m for m in _reaches(graph, name) if name in graph[m] and not name.startswith(m)}
            outside = {m for m in back if not m.startswith(ENGINES)}
            if outside:
                loops.append(f"{name} <- {sorted(outside)}")
    assert loops == []


def test_engine_modules_import_first_in_a_fresh_interpreter() -> None:
    # Each module the engines' rules import, imported on its own, loads without a loop.
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    for first in (
        "planner.core.logs.lines",
        "planner.core.parallel",
        "planner.core.budget.facts",
        "planner.core.engines.vllm.need",
        "planner.core.engines.readers",
        "planner.core.reconcile_schema",
        "planner.core.inputs",
    ):
        subprocess.run([sys.executable, "-c", code, first], check=True, cwd=ROOT)
