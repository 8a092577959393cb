"""Fixtures shared across test packages: the calibration-store backends (SQLite, PostgreSQL)."""

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# No test reaches the real Hugging Face Hub: model ids outside the bundled catalog fail fast
# (tests/resolve turns the Hub on against its own loopback server).
os.environ.setdefault("KVPLAN_HUB_ENABLED", "false")

from tests.store_backends import backend, pg_schema_url, postgres_url
from tests.work_pool import shared_pool

__all__ = ["backend", "pg_schema_url", "postgres_url", "shared_pool"]

# The oracle's release-matrix report; a plugin so that pytest-xdist's controller loads it too.
pytest_plugins = ["tests.oracle.report"]


CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Debian's chromium, one per test process: Playwright's sync API allows one running
    instance in a thread, so every browser test (tests/web, tests/e2e) shares this one."""
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium not installed (/usr/bin/chromium); .ci/run installs it")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield instance
        instance.close()


def _in_a_browser(item: pytest.Item) -> bool:
    return "browser" in getattr(item, "fixturenames", ()) or item.path.name.endswith("_browser.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests run last. Playwright's sync API keeps an asyncio loop running in the main
    thread from its first use to the end of the session (the browser is session-scoped), and an
    asyncio test after it cannot start its own loop ("Runner.run() cannot be called from a
    running event loop"). The sort is stable: every other test keeps its order.

    `make test` runs the suite on pytest-xdist workers a file at a time, in this order
    (`--dist loadfile --no-loadscope-reorder`), so on every worker too the browser files come
    after all the others. That needs each browser test in a `*_browser.py` file of its own
    kind: a file that mixed both would carry its browser tests to the front."""
    mixed = sorted(
        {str(it.path) for it in items if _in_a_browser(it) != it.path.name.endswith("_browser.py")}
    )
    if mixed:
        raise pytest.UsageError(
            "browser tests belong in *_browser.py files, and only there: " + ", ".join(mixed)
        )
    items.sort(key=_in_a_browser)
