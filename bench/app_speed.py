"""The app's own cost per request, in process: kvplan's ASGI app beside the bare FastAPI app of
`bench/bare_app.py`, called directly (no sockets, no HTTP parsing), interleaved in one process.

    .venv/bin/python bench/app_speed.py [--rounds 7] [--requests 2000]

Each figure is µs of this process's CPU time per request, the best of the rounds: CPU time, not
wall time, so other jobs on a shared box stretch it little; compare the ratios. What it leaves
out (uvicorn's HTTP parsing and the socket writes, the same for both apps) makes its ratios a
lower bound of the loopback ones (`bench/api_throughput.sh`). Routes: bare `GET /item/{id}`;
kvplan `GET /api/v1/gpus/{id}`, `POST /api/v1/plan` with a distinct body each time (context
varies, so the answer memo does not hit), and the same with the JSON access log written (to
/dev/null, through the service's own formatter) to show that line's cost.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _scope(method: str, path: str, body: bytes) -> dict[str, Any]:
    headers = [(b"host", b"127.0.0.1"), (b"user-agent", b"bench")]
    if body:
        headers += [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": method,
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": headers,
    }


async def _call(app: Any, method: str, path: str, body: bytes) -> int:
    status = 0
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        await asyncio.sleep(3600)  # the client stays: no disconnect
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(_scope(method, path, body), receive, send)
    return status


_N = [0]


def _plan_body() -> bytes:
    _N[0] += 1
    ctx = 1024 + (_N[0] * 7919) % 130048
    return (
        b'{"model":"meta-llama/Llama-3.1-8B","kv_cache_dtype":"bf16","context_tokens":%d,'
        b'"kv_budget_bytes":51539607552}' % ctx
    )


async def _cpu_us(app: Any, method: str, path: str, body: Callable[[], bytes], n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        status = await _call(app, method, path, body())
        if status != 200:
            raise SystemExit(f"{method} {path} answered {status}")
    return 1e6 * (time.process_time() - start) / n


async def main(args: argparse.Namespace) -> None:
    os.environ.setdefault("KVPLAN_DATA_DIR", tempfile.mkdtemp(prefix="kvplan-bench-"))
    import bare_app

    from planner.app import create_app
    from planner.logs import JsonFormatter

    app = create_app()
    access = logging.getLogger("planner.access")
    sink = logging.StreamHandler(open(os.devnull, "w"))  # open for the whole run
    sink.setFormatter(JsonFormatter())
    none = b""
    cases: dict[str, tuple[Any, str, str, Callable[[], bytes]]] = {
        "bare GET /item/{id}": (bare_app.app, "GET", "/item/H100-SXM-80GB", lambda: none),
        "GET /api/v1/gpus/{id}": (app, "GET", "/api/v1/gpus/H100-SXM-80GB", lambda: none),
        "POST /api/v1/plan, distinct": (app, "POST", "/api/v1/plan", _plan_body),
        "gpus/{id}, access log on": (app, "GET", "/api/v1/gpus/H100-SXM-80GB", lambda: none),
    }
    best: dict[str, float] = {}
    async with app.router.lifespan_context(app):
        for name, (target, method, path, body) in cases.items():  # warm-up
            await _cpu_us(target, method, path, body, 200)
        for _ in range(args.rounds):
            for name, (target, method, path, body) in cases.items():
                logged = name.endswith("access log on")
                if logged:
                    access.addHandler(sink)
                    access.setLevel(logging.INFO)
                    access.propagate = False
                n = args.requests // (4 if "plan" in name else 1)
                us = await _cpu_us(target, method, path, body, n)
                if logged:
                    access.removeHandler(sink)
                best[name] = min(best.get(name, float("inf")), us)
    bare = best["bare GET /item/{id}"]
    print(f"in process, CPU µs per request, best of {args.rounds} rounds")
    print(f"{'route':30} {'µs':>8} {'bare/this':>10}")
    for name, us in best.items():
        print(f"{name:30} {us:8.1f} {bare / us:9.2f}x")
    log_us = best["gpus/{id}, access log on"] - best["GET /api/v1/gpus/{id}"]
    print(f"access log line (JSON, formatted and written): {log_us:.1f} µs per request")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--requests", type=int, default=2000, help="per round (plans: a quarter)")
    asyncio.run(main(ap.parse_args()))
