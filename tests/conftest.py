"""Fixtures shared across test packages: the calibration-store backends (SQLite, PostgreSQL)."""

from tests.store_backends import backend, pg_schema_url, postgres_url

__all__ = ["backend", "pg_schema_url", "postgres_url"]
