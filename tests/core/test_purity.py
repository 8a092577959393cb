"""`planner/core` stays pure: no web stack, no I/O, no env, no logging (DESIGN.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "planner" / "core"
FORBIDDEN_IMPORTS = {
    "fastapi",
    "starlette",
    "uvicorn",
    "httpx",
    "jinja2",
    "typer",
    "logging",
    "os",
    "sqlite3",
    "pathlib",
    "socket",
    "subprocess",
    "prometheus_client",
    "psycopg",
    "requests",
    "shutil",
}
FORBIDDEN_CALLS = {"open", "print", "input", "getenv"}


def test_core_modules_import_nothing_impure() -> None:
    offenders = []
    for path in sorted(CORE.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in FORBIDDEN_CALLS:
                    offenders.append(f"{path.name}: calls {node.func.id}()")
            for name in names:
                if name.split(".")[0] in FORBIDDEN_IMPORTS:
                    offenders.append(f"{path.name}: imports {name}")
                # The catalog and every front end are handed in or call in; core never
                # imports them (not even inside a function), so there is no import loop.
                if name.startswith("planner.") and not name.startswith(
                    ("planner.core.", "planner.core")
                ):
                    offenders.append(f"{path.relative_to(CORE)}: imports {name}")
    assert offenders == []


def test_core_modules_stay_small() -> None:
    # One concept per module: no module of the core over about 400 lines.
    sizes = {
        str(p.relative_to(CORE)): len(p.read_text("utf-8").splitlines()) for p in CORE.rglob("*.py")
    }
    assert {name: n for name, n in sizes.items() if n > 420} == {}


def test_engine_names_are_compared_only_inside_the_engines_package() -> None:
    # Outside planner/core/engines no code compares an engine name with a string literal.
    names = {"vllm", "sglang", "trtllm", "transformers"}
    offenders = []
    root = CORE.parent
    for path in sorted(root.rglob("*.py")):
        if CORE / "engines" in path.parents:
            continue
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                parts = [node.left, *node.comparators]
                literals = {
                    p.value for p in parts if isinstance(p, ast.Constant) and p.value in names
                }
                if literals:
                    offenders.append(f"{path.relative_to(root)}:{node.lineno}")
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                if len(keys & names) >= 2:  # a per-engine lookup table
                    offenders.append(f"{path.relative_to(root)}:{node.lineno} (table)")
    assert offenders == []


def test_importing_core_and_planning_loads_no_web_stack() -> None:
    code = (
        "import sys\n"
        "from planner.service import plan\n"
        "from planner.core.schema import PlanRequest\n"
        "plan(PlanRequest(model='meta-llama/Llama-3.1-8B', context_tokens=8192,"
        " kv_budget_bytes=1<<35))\n"
        "bad = [m for m in ('fastapi','starlette','uvicorn','httpx','jinja2','sqlite3')"
        " if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
