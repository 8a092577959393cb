"""Fixtures shared across test packages: the calibration-store backends (SQLite, PostgreSQL)."""

import os

import pytest

# No test reaches the real Hugging Face Hub: model ids outside the bundled catalog fail fast
# (tests/resolve turns the Hub on against its own loopback server).
os.environ.setdefault("KVPLAN_HUB_ENABLED", "false")

from tests.store_backends import backend, pg_schema_url, postgres_url
from tests.work_pool import shared_pool

__all__ = ["backend", "pg_schema_url", "postgres_url", "shared_pool"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests run last. Playwright's sync API keeps an asyncio loop running in the main
    thread from its first use to the end of the session (the browser is session-scoped), and an
    asyncio test after it cannot start its own loop ("Runner.run() cannot be called from a
    running event loop"). The sort is stable: every other test keeps its order."""
    items.sort(key=lambda item: "browser" in getattr(item, "fixturenames", ()))
