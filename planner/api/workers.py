"""A bounded pool of worker processes whose deadline really stops the work.

Plans, sweeps, recommendations, reconciliations and the page's answers are pure-Python CPU work.
On the event loop they stall every other request (`/healthz` included); in a thread they still
hold the GIL, and a thread cannot be interrupted, so a deadline could only stop waiting for
it. Here each job runs in a separate process: at the deadline (or when the request is cancelled,
e.g. the client went away) the process is killed and replaced, so the CPU is really freed.

- `size` processes (KVPLAN_WORKERS), each a fresh interpreter (`python -m planner.api.worker`,
  about 0.4 s to start) rather than a fork of the server: a fork would copy the server's
  threads, sockets and database connection, and multiprocessing's spawn/forkserver would
  re-import the CLI entry point;
- at most `max_waiting` jobs wait for a free process (KVPLAN_WORK_QUEUE); the next one is
  refused at once with 503 + `Retry-After` (`PoolBusy`);
- a worker whose RSS passed `max_rss_bytes` after a job is replaced (KVPLAN_WORKER_MAX_RSS_BYTES),
  and each worker's address space is capped (KVPLAN_WORKER_MEMORY_BYTES): a job that needs
  more fails with MemoryError in its own process, never in the server's;
- the caller waits on the pipe with the event loop's reader, never in a thread.

Jobs are module-level functions (pickled by name) taking and returning picklable values.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, TypeVar

import anyio
import anyio.to_thread

logger = logging.getLogger("planner.workers")

_START_TIMEOUT_SECONDS = 60.0

T = TypeVar("T")


class PoolBusy(Exception):
    """Every worker is busy and the queue is full."""


class WorkTimeout(Exception):
    """The job ran past its deadline; its worker was killed."""


class WorkerDied(Exception):
    """The worker process exited during the job (out of memory, killed from outside)."""


@dataclass
class _Worker:
    process: subprocess.Popen[bytes]
    send: Connection
    recv: Connection
    jobs: int = 0

    def kill(self) -> None:
        try:
            self.process.kill()
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not wait
            pass
        self.send.close()
        self.recv.close()


@dataclass
class PoolStats:
    started: int = 0
    killed_by_deadline: int = 0
    recycled: int = 0
    died: int = 0
    retried: int = 0  # jobs run again after their worker died
    cancelled: int = 0  # jobs stopped because their caller went away
    jobs: int = 0


class WorkerPool:
    def __init__(
        self,
        size: int,
        *,
        max_waiting: int,
        max_rss_bytes: int,
        memory_bytes: int | None = None,
    ) -> None:
        self.size = size
        self.max_waiting = max_waiting
        self.max_rss_bytes = max_rss_bytes
        self.memory_bytes = memory_bytes
        self._idle: list[_Worker] = []
        self._spawn_lock = threading.Lock()
        self._slots: anyio.Semaphore | None = None
        self.running = 0
        self.waiting = 0
        self.closed = False
        self.stats = PoolStats()

    # -- processes -------------------------------------------------------------------------

    def _spawn(self) -> _Worker:
        with self._spawn_lock:
            to_child_r, to_child_w = os.pipe()
            from_child_r, from_child_w = os.pipe()
            try:
                process = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "planner.api.worker",
                        str(to_child_r),
                        str(from_child_w),
                        str(self.memory_bytes or 0),
                    ],
                    pass_fds=(to_child_r, from_child_w),
                    stdin=subprocess.DEVNULL,
                    close_fds=True,
                )
            finally:
                os.close(to_child_r)
                os.close(from_child_w)
            worker = _Worker(
                process,
                Connection(to_child_w, readable=False),
                Connection(from_child_r, writable=False),
            )
        # Wait (in this thread) for the worker to import and warm up: a job's deadline then
        # measures the job, not an interpreter start.
        try:
            if not worker.recv.poll(_START_TIMEOUT_SECONDS) or worker.recv.recv()[0] != "ready":
                raise WorkerDied("worker did not start")
        except (EOFError, OSError) as exc:
            worker.kill()
            raise WorkerDied(f"worker did not start: {exc}") from None
        self.stats.started += 1
        return worker

    def _replenish(self) -> None:
        """Start a replacement in the background after a kill, so the next job finds one."""

        def spawn_one() -> None:
            if self.closed or len(self._idle) + self.running >= self.size:
                return
            try:
                worker = self._spawn()
            except WorkerDied:
                return
            if self.closed:
                worker.kill()
            else:
                self._idle.append(worker)

        threading.Thread(target=spawn_one, name="kvplan-worker-spawn", daemon=True).start()

    def start(self) -> None:
        """Start every worker now (blocking: call from a thread or before serving)."""
        while len(self._idle) < self.size and not self.closed:
            self._idle.append(self._spawn())

    def close(self) -> None:
        """Ask every idle worker to exit, then wait for them together: shutdown takes one
        worker's exit, not the sum of them."""
        self.closed = True
        idle, self._idle = self._idle, []
        for worker in idle:
            try:
                worker.send.send(None)
            except OSError:
                pass
        for worker in idle:
            try:
                worker.process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
            worker.kill()

    @property
    def saturated(self) -> bool:
        """No worker free and the queue full: the next job would be refused."""
        return self.running >= self.size and self.waiting >= self.max_waiting

    # -- jobs ------------------------------------------------------------------------------

    async def _take(self) -> _Worker:
        while self._idle:
            worker = self._idle.pop()
            if worker.process.poll() is None:
                return worker
            # Killed while idle (OOM killer, an operator): replaced now, not blamed on a job.
            self.stats.died += 1
            worker.kill()
        return await anyio.to_thread.run_sync(self._spawn)

    def _give_back(self, worker: _Worker, rss_bytes: int) -> None:
        if self.closed or len(self._idle) >= self.size:
            worker.kill()
        elif rss_bytes > self.max_rss_bytes:
            self.stats.recycled += 1
            logger.info("worker recycled", extra={"rss_bytes": rss_bytes, "jobs": worker.jobs})
            worker.kill()
            self._replenish()
        else:
            self._idle.append(worker)

    async def run(self, deadline_seconds: float, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in a worker; `WorkTimeout` after `deadline_seconds` (waiting for a free
        worker included), `PoolBusy` when the queue is full. Cancelling the caller kills the job.
        A worker that dies under the job is replaced and the job tried once more on a fresh one
        (within the same deadline); a second death is `WorkerDied`.
        """
        if self.closed:
            raise PoolBusy
        if self._slots is None:
            self._slots = anyio.Semaphore(self.size)
        if self.running >= self.size and self.waiting >= self.max_waiting:
            raise PoolBusy
        with anyio.move_on_after(deadline_seconds) as scope:
            self.waiting += 1
            try:
                await self._slots.acquire()
            finally:
                self.waiting -= 1
            self.running += 1
            try:
                try:
                    status, value = await self._attempt(scope, fn, args)
                except WorkerDied:
                    self.stats.retried += 1
                    status, value = await self._attempt(scope, fn, args)
            finally:
                self.running -= 1
                self._slots.release()
            if status == "error":
                raise value
            return value  # type: ignore[no-any-return]
        raise WorkTimeout

    async def _attempt(
        self, scope: anyio.CancelScope, fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> tuple[str, Any]:
        loop = asyncio.get_running_loop()
        worker: _Worker | None = None
        try:
            worker = await self._take()
            worker.jobs += 1
            self.stats.jobs += 1
            worker.send.send((fn, args))
            ready = loop.create_future()
            fd = worker.recv.fileno()

            def wake() -> None:
                if not ready.done():
                    ready.set_result(None)

            loop.add_reader(fd, wake)
            try:
                await ready
            finally:
                loop.remove_reader(fd)
                # uvloop's add_reader makes the fd non-blocking; the read below blocks
                # (in a thread) until the whole answer is in.
                os.set_blocking(fd, True)
            # The answer is bounded (KVPLAN_MAX_RESPONSE_BYTES); read it off the loop.
            status, value, rss = await anyio.to_thread.run_sync(worker.recv.recv)
        except BaseException as exc:
            if worker is not None:
                # Cancelled (deadline, client gone) or the pipe broke: stop the work itself.
                worker.kill()
                self._replenish()
                if isinstance(exc, EOFError | OSError):
                    self.stats.died += 1
                    raise WorkerDied(str(exc) or "worker exited") from None
                if scope.cancel_called:
                    self.stats.killed_by_deadline += 1
                else:
                    self.stats.cancelled += 1
            raise
        self._give_back(worker, rss)
        return status, value


__all__ = ["PoolBusy", "PoolStats", "WorkTimeout", "WorkerDied", "WorkerPool"]
