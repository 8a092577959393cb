"""A real `kvplan serve` child process on a free loopback port, for crash and replica tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

ADMIN_TOKEN = "t0k3n-for-crash-tests-0123456789"
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
START_TIMEOUT_SECONDS = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class LiveServer:
    """`python -m planner serve --port P`; `url` once /readyz answers 200."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        child_env = {
            k: v for k, v in os.environ.items() if not k.startswith(("KVPLAN_", "PROMETHEUS_"))
        }
        child_env.update(
            {
                "KVPLAN_ADMIN_TOKEN": ADMIN_TOKEN,
                "KVPLAN_LOG_LEVEL": "warning",
                # The writers post as fast as they can from one address: lift the admin rate.
                "KVPLAN_ADMIN_RATE_PER_MINUTE": "100000",
                "KVPLAN_ADMIN_RATE_BURST": "100000",
                **env,
            }
        )
        self._log = log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "planner",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            env=child_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {self.log()}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server not ready after {START_TIMEOUT_SECONDS} s: {self.log()}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush, no close — a crash."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()

    def __enter__(self) -> LiveServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
