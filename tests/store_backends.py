"""The two calibration-store backends, as test fixtures see them.

A `Backend` opens a store (as often as a test wants: restarts), names the environment a server
process needs to use the same store, and checks the database's integrity.

PostgreSQL comes from KVPLAN_TEST_DATABASE_URL (`eval "$(scripts/pg_test_server.sh start)"`);
each test gets its own schema (via `options=-csearch_path=…` in the URL) and drops it after.
Without the variable, or with the server unreachable, the PostgreSQL variants skip, unless
KVPLAN_REQUIRE_POSTGRES=1 (set by .ci/run), where they fail: CI must not pass by skipping.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from planner.store import DB_FILENAME, Store, open_store

TEST_URL_ENV = "KVPLAN_TEST_DATABASE_URL"
REQUIRE_ENV = "KVPLAN_REQUIRE_POSTGRES"
BACKENDS = ("sqlite", "postgresql")


def postgres_required() -> bool:
    return os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0", "false", "no")


def unavailable(reason: str) -> None:
    """Skip, or fail when CI requires PostgreSQL."""
    if postgres_required():
        pytest.fail(f"{REQUIRE_ENV} is set but {reason}", pytrace=False)
    pytest.skip(reason)


def with_search_path(url: str, schema: str) -> str:
    """`url` with every unqualified table living in `schema` (libpq `options` parameter)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-csearch_path={schema}"))
    return urlunsplit(parts._replace(query=urlencode(query)))


@dataclass
class Backend:
    name: str
    tmp_path: Path
    url: str | None = None  # PostgreSQL only
    opened: list[Any] = field(default_factory=list)

    def open(self) -> Any:
        store = open_store(self.tmp_path, self.url)
        self.opened.append(store)
        return store

    def server_env(self) -> dict[str, str]:
        """Environment for a `kvplan serve` child that uses this same store."""
        env = {"KVPLAN_DATA_DIR": str(self.tmp_path), "KVPLAN_DATABASE_URL": ""}
        if self.url:
            env["KVPLAN_DATABASE_URL"] = self.url
        return env

    def sql(self, statement: str) -> list[tuple[Any, ...]]:
        """Run one statement outside the store (to tamper with or inspect the database)."""
        if self.url is None:
            import sqlite3

            with sqlite3.connect(self.tmp_path / DB_FILENAME) as conn:
                return conn.execute(statement).fetchall()
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            cur = conn.execute(statement)  # type: ignore[call-overload]
            return cur.fetchall() if cur.description else []

    def integrity_problems(self) -> list[str]:
        """What the database's own checker reports; [] when the store is sound."""
        if self.url is None:
            rows = self.sql("PRAGMA integrity_check")
            return [] if rows == [("ok",)] else [str(r[0]) for r in rows]
        return _pg_integrity_problems(self.url)

    def close_all(self) -> None:
        for store in self.opened:
            store.close()


def _pg_integrity_problems(url: str) -> list[str]:
    """amcheck on the heap and every btree index of `calibrations` when the extension can be
    created (it ships with Debian's postgresql package; the test cluster's user is superuser),
    then a full scan that parses every stored record."""
    import psycopg

    from planner.probe import Calibration

    problems: list[str] = []
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck SCHEMA public")
            has_amcheck = True
        except psycopg.Error:
            has_amcheck = False
        if has_amcheck:
            for row in conn.execute(
                "SELECT blkno, offnum, msg FROM public.verify_heapam('calibrations')"
            ):
                problems.append(f"heap: {row}")
            indexes = conn.execute(
                "SELECT c.oid::regclass::text FROM pg_index i JOIN pg_class c "
                "ON c.oid = i.indexrelid WHERE i.indrelid = 'calibrations'::regclass"
            ).fetchall()
            for (index,) in indexes:
                try:
                    conn.execute(
                        "SELECT public.bt_index_check(%s::regclass, true)",  # heapallindexed
                        (index,),
                    )
                except psycopg.Error as exc:
                    problems.append(f"index {index}: {exc}")
        for seq, ident, record in conn.execute("SELECT seq, id, record FROM calibrations"):
            try:
                if Calibration.model_validate_json(record).id != ident:
                    problems.append(f"row {seq}: id column and record disagree")
            except ValueError as exc:
                problems.append(f"row {seq}: {exc}")
    return problems


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The test server's URL, once it answers; skip (or fail in CI) otherwise."""
    url = os.environ.get(TEST_URL_ENV, "").strip()
    if not url:
        unavailable(f'{TEST_URL_ENV} is unset (eval "$(scripts/pg_test_server.sh start)")')
    try:
        import psycopg
    except ImportError:
        unavailable("psycopg is not installed (pip install -e '.[postgres]')")
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        unavailable(f"PostgreSQL at {TEST_URL_ENV} does not answer: {exc}")
    return url


@pytest.fixture
def pg_schema_url(postgres_url: str) -> Iterator[str]:
    """A fresh, empty schema for one test, dropped afterwards."""
    import psycopg

    schema = f"kvplan_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")  # type: ignore[call-overload]
    try:
        yield with_search_path(postgres_url, schema)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")  # type: ignore[call-overload]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Each backend in turn; stores opened through it are closed after the test."""
    url = request.getfixturevalue("pg_schema_url") if request.param == "postgresql" else None
    b = Backend(request.param, tmp_path, url)
    try:
        yield b
    finally:
        b.close_all()


__all__ = ["BACKENDS", "Backend", "Store", "backend", "pg_schema_url", "postgres_url"]
