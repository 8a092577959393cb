"""One worker pool for the suite's apps.

Each app the tests build used to start its own pool: a fresh interpreter per test for the first
job (≈ 1 s, more on a loaded box) and its exit at shutdown, which made up most of the web and
API tests' time. Apps whose settings ask for the default pool share this one instead; it runs
real worker processes, started once and closed at the end of the session. Tests of the pool's
own behaviour (deadlines, kills, queue limits, stats) build apps with their own settings and so
their own pools.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from planner.api.work import new_pool
from planner.api.workers import WorkerPool
from planner.settings import Settings


def _shape(settings: Settings) -> tuple[int, int, int, int]:
    return (
        settings.workers,
        settings.work_queue,
        settings.worker_max_rss_bytes,
        settings.worker_memory_bytes,
    )


class SharedPool:
    def __init__(self, settings: Settings) -> None:
        self._shape = _shape(settings)
        self.pool = new_pool(settings)
        threading.Thread(target=self.pool.start, name="tests-pool-start", daemon=True).start()

    def for_settings(self, settings: Settings) -> WorkerPool | None:
        """The shared pool when `settings` ask for the same pool; None (the app builds its own)
        otherwise."""
        return self.pool if _shape(settings) == self._shape else None


@pytest.fixture(scope="session")
def shared_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedPool]:
    shared = SharedPool(Settings(data_dir=tmp_path_factory.mktemp("pool")))
    yield shared
    shared.pool.close()
