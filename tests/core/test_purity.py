"""`planner/core` stays pure: no web stack, no I/O, no env, no logging (DESIGN.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "planner" / "core"
FORBIDDEN_IMPORTS = {
    "fastapi", "starlette", "uvicorn", "httpx", "jinja2", "typer", "logging", "os", "sqlite3",
    "pathlib", "socket", "subprocess", "prometheus_client", "psycopg", "requests", "shutil",
}
FORBIDDEN_CALLS = {"open", "print", "input", "getenv"}


def test_core_modules_import_nothing_impure() -> None:
    offenders = []
    for path in sorted(CORE.glob("*.py")):
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
