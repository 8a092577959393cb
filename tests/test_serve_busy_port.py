"""`kvplan serve` on a port that is already taken (issue 25): uvicorn's one clear error, and
no traceback from the plan workers the app had started (they find their parent gone)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path


def test_busy_port_gives_one_clear_error_and_no_traceback(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("KVPLAN_")}
        env.update(KVPLAN_DATA_DIR=str(tmp_path), KVPLAN_WORKERS="2")
        # communicate() waits for every holder of the pipes, the plan workers included.
        done = subprocess.run(
            [sys.executable, "-m", "planner", "serve", "--port", str(port)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "address already in use" in out.lower()
    assert "Traceback" not in out and "BrokenPipeError" not in out


def test_a_worker_whose_parent_is_gone_ends_quietly() -> None:
    # What the race above does when the worker warms up after the server has exited: its
    # "ready" goes into a pipe nobody reads. Without the guard this raises BrokenPipeError.
    from multiprocessing import Pipe

    from planner.api.worker import serve

    inbox, _ = Pipe(duplex=False)
    parent_end, outbox = Pipe(duplex=False)
    parent_end.close()
    serve(inbox, outbox, 0)  # returns; nothing raised
