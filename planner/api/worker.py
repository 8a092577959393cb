"""A worker process of `planner.api.workers`: `python -m planner.api.worker IN_FD OUT_FD MEM`.

Says `("ready", pid, rss_bytes)` once imported and warm, then reads `(fn, args)` from IN_FD,
answers `("ok", result, rss_bytes)` or `("error", exc, rss_bytes)`
on OUT_FD, until it reads None or the pipe closes. MEM > 0 caps the address space (RLIMIT_AS),
so a job that needs more raises MemoryError here, in this process only.
"""

from __future__ import annotations

import os
import resource
import sys
from multiprocessing.connection import Connection
from typing import Any

_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * _PAGE_SIZE


def _send(outbox: Connection, message: tuple[Any, ...]) -> bool:
    """False once the parent has gone (its end of the pipe is closed, e.g. `kvplan serve`
    exiting on a busy port while this worker warmed up): nobody is left to tell, so the worker
    ends quietly instead of printing a BrokenPipeError traceback after the parent's error."""
    try:
        outbox.send(message)
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True


def serve(inbox: Connection, outbox: Connection, memory_bytes: int) -> None:
    # Imported before the cap and before the first job, so jobs start warm.
    from planner.api import jobs

    jobs.warm_up()
    if not _send(outbox, ("ready", os.getpid(), rss_bytes())):
        return
    if memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    while True:
        try:
            message = inbox.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        fn, args = message
        try:
            reply: tuple[str, Any] = ("ok", fn(*args))
        except MemoryError:
            reply = ("error", MemoryError("the job needed more memory than a worker may use"))
        except Exception as exc:  # returned to the caller, which re-raises it
            reply = ("error", exc)
        try:
            sent = _send(outbox, (reply[0], reply[1], rss_bytes()))
        except Exception as exc:  # an unpicklable result or error
            sent = _send(
                outbox, ("error", RuntimeError(f"job result could not be sent: {exc!r}"), 0)
            )
        if not sent:
            return


def main(argv: list[str]) -> None:
    in_fd, out_fd, memory = (int(a) for a in argv[1:4])
    serve(Connection(in_fd, writable=False), Connection(out_fd, readable=False), memory)
    # Every answer is already in the pipe and nothing else is buffered: skip the interpreter's
    # teardown (freeing the catalog and caches object by object), which outlasted most jobs
    # and held up the server's shutdown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
