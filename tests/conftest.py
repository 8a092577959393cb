"""Fixtures shared across test packages: the calibration-store backends (SQLite, PostgreSQL)."""

import os

# No test reaches the real Hugging Face Hub: model ids outside the bundled catalog fail fast
# (tests/resolve turns the Hub on against its own loopback server).
os.environ.setdefault("KVPLAN_HUB_ENABLED", "false")

from tests.store_backends import backend, pg_schema_url, postgres_url

__all__ = ["backend", "pg_schema_url", "postgres_url"]
