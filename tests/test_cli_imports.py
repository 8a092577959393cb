"""`kvplan plan` loads only what a plan needs (issue 26): no web stack, HTTP client, numpy or
probe, checked in a fresh interpreter after a real plan."""

from __future__ import annotations

import subprocess
import sys

# Each one is loaded by another command (serve, probe, lab) or by the server, never by a plan.
NOT_FOR_A_PLAN = (
    "fastapi", "starlette", "uvicorn", "httpx", "numpy", "planner.probe", "planner.api",
)  # fmt: skip

_CODE = """
import sys
from planner.cli import main
sys.argv = ["kvplan", "plan", "--model", "meta-llama/Llama-3.1-8B", "--context", "8k",
            "--budget", "48GiB", "--json"]
try:
    main()
except SystemExit as exc:
    code = exc.code or 0
else:
    code = 0
loaded = sorted(m for m in sys.modules if any(m == n or m.startswith(n + ".") for n in {names!r}))
sys.stderr.write(repr(loaded) + "\\n")
sys.exit(code or (3 if loaded else 0))
"""


def test_plan_imports_no_web_stack_client_numpy_or_probe() -> None:
    code = _CODE.replace("{names!r}", repr(NOT_FOR_A_PLAN))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert '"max_requests"' in result.stdout  # the plan itself was answered
