"""Calibration records in PostgreSQL, for several replicas sharing one store (psycopg 3).

Same interface (`CalibrationStore`), same tables and columns, same `schema_version` numbering
as the SQLite store in `planner.store`; only the SQL dialect differs (identity column, DOUBLE
PRECISION). Timestamps stay ISO 8601 text, as in SQLite, so rows copy between backends as is.

Durability: each `add` commits before it returns, and the session sets `synchronous_commit=on`
(whatever the server or role default), so COMMIT returns only once the WAL is flushed: a record
acknowledged with 201 survives a crash of this process or of the database server.

Replicas: migrations run in one transaction under an advisory lock, so replicas starting
together apply each migration once. One connection per process, serialised by a lock (writes
are rare); a connection the server dropped is reopened on the next call, and reads retry once
on a fresh connection. An `add` whose COMMIT outcome is unknown is reported as a failure (503)
and not retried here: the client may retry, which at worst stores the record twice.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import conninfo
from pydantic import ValidationError

from planner.probe.model import Calibration, CalibrationIn
from planner.store import (
    MAX_LIST_LIMIT,
    SCHEMA_VERSION,
    IdempotencyConflict,
    StoreError,
    apply_migrations,
    new_record_row,
)

CONNECT_TIMEOUT_SECONDS = 5
# Every statement here touches a handful of rows; anything slower is a stuck server or lock.
STATEMENT_TIMEOUT_MS = 10_000
# pg_advisory_xact_lock key for migrations: b"kvplan" as an integer, any fixed value works.
_MIGRATION_LOCK_KEY = 0x6B76706C616E

# (version, statements), the PostgreSQL spelling of planner.store.MIGRATIONS: same versions,
# tables and columns. Append only: a released migration is never edited.
MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            """CREATE TABLE calibrations (
                seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                id TEXT NOT NULL UNIQUE,
                measured_at TEXT NOT NULL,
                stored_at TEXT NOT NULL,
                device_name TEXT NOT NULL,
                backend TEXT NOT NULL,
                copy_bandwidth_bytes_per_s DOUBLE PRECISION NOT NULL,
                decode_bandwidth_bytes_per_s DOUBLE PRECISION NOT NULL,
                fixed_overhead_seconds DOUBLE PRECISION NOT NULL,
                record TEXT NOT NULL
            )""",
            "CREATE INDEX calibrations_device ON calibrations (device_name, measured_at)",
        ),
    ),
    (
        2,
        (
            """CREATE TABLE idempotency_keys (
                key TEXT PRIMARY KEY,
                fingerprint TEXT NOT NULL,
                calibration_id TEXT NOT NULL,
                created_at TEXT NOT NULL
            )""",
        ),
    ),
)
assert MIGRATIONS[-1][0] == SCHEMA_VERSION, "SQLite and PostgreSQL schemas must move together"

_T = TypeVar("_T")


def redacted(url: str) -> str:
    """The URL without its password, for messages and logs."""
    try:
        parts = conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://<unparseable URL>"
    user = f"{parts['user']}@" if parts.get("user") else ""
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{parts.get('host', '')}{port}/{parts.get('dbname', '')}"


class PgStore:
    """PostgreSQL calibration store at `database_url` (KVPLAN_DATABASE_URL)."""

    def __init__(self, database_url: str) -> None:
        """Connect and bring the schema up to date; StoreError (password-free) if either fails."""
        self.url = redacted(database_url)
        self._database_url = database_url
        self._lock = threading.Lock()
        self._closed = False
        self._conn: psycopg.Connection[Any] | None = None
        with self._lock:
            self._run(self._migrate, what="migrate", retry=False)

    # -- connection ------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        kwargs: dict[str, Any] = {"autocommit": True, "application_name": "kvplan"}
        if "connect_timeout" not in conninfo.conninfo_to_dict(self._database_url):
            kwargs["connect_timeout"] = CONNECT_TIMEOUT_SECONDS
        conn = psycopg.connect(self._database_url, **kwargs)
        conn.execute("SET synchronous_commit = on")
        conn.execute(f"SET statement_timeout = {int(STATEMENT_TIMEOUT_MS)}")
        return conn

    def _connection(self) -> psycopg.Connection[Any]:
        if self._closed:
            raise StoreError(f"the calibration store {self.url} is closed")
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop()
            self._conn = self._connect()
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def _run(
        self, op: Callable[[psycopg.Connection[Any]], _T], *, what: str, retry: bool = True
    ) -> _T:
        """`op(conn)` under the caller's lock; driver errors become StoreError naming the store.

        With `retry`, a failure on a connection the server dropped (restart, failover, idle
        timeout) is retried once on a new connection: only for reads, which are idempotent.
        """
        for attempt in (1, 2):
            try:
                return op(self._connection())
            except psycopg.Error as exc:
                broken = self._conn is None or self._conn.closed or self._conn.broken
                if broken:
                    self._drop()
                if retry and broken and attempt == 1:
                    continue
                raise StoreError(
                    f"cannot {what} the calibration store {self.url}: "
                    f"{type(exc).__name__}: {str(exc).strip()}; check KVPLAN_DATABASE_URL and "
                    "that the server is reachable"
                ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    # -- schema ----------------------------------------------------------------------------

    @staticmethod
    def _version(conn: psycopg.Connection[Any]) -> int:
        row = conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
        if not row or not row[0]:
            return 0
        found = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        return int(found[0] or 0) if found else 0

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            # Replicas starting together: the second waits here, then sees the new version.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK_KEY,))
            apply_migrations(
                conn.execute,
                self._version(conn),
                MIGRATIONS,
                "INSERT INTO schema_version (version, applied_at) VALUES (%s, %s)",
                self.url,
                "KVPLAN_DATABASE_URL",
            )

    def schema_version(self) -> int:
        with self._lock:
            return self._run(self._version, what="read")

    # -- records ---------------------------------------------------------------------------

    def add(self, record: CalibrationIn) -> Calibration:
        stored, row = new_record_row(record)

        def insert(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():  # COMMIT on exit; synchronous_commit=on flushes the WAL
                conn.execute(
                    "INSERT INTO calibrations (id, measured_at, stored_at, device_name, backend, "
                    "copy_bandwidth_bytes_per_s, decode_bandwidth_bytes_per_s, "
                    "fixed_overhead_seconds, record) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    row,
                )

        with self._lock:
            self._run(insert, what="write to", retry=False)
        return stored

    def add_once(
        self, record: CalibrationIn, key: str, fingerprint: str
    ) -> tuple[Calibration, bool]:
        stored, row = new_record_row(record)

        def insert_once(conn: psycopg.Connection[Any]) -> tuple[str, str] | None:
            with conn.transaction():
                # A concurrent insert of the same key waits here on the unique index until the
                # first commits, then sees its row: exactly one record per key.
                claimed = conn.execute(
                    "INSERT INTO idempotency_keys (key, fingerprint, calibration_id, created_at) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, fingerprint, stored.id, row[2]),
                ).fetchone()
                if claimed is None:
                    found = conn.execute(
                        "SELECT k.fingerprint, c.record FROM idempotency_keys k "
                        "JOIN calibrations c ON c.id = k.calibration_id WHERE k.key = %s",
                        (key,),
                    ).fetchone()
                    return (str(found[0]), str(found[1])) if found else ("", "")
                conn.execute(
                    "INSERT INTO calibrations (id, measured_at, stored_at, device_name, backend, "
                    "copy_bandwidth_bytes_per_s, decode_bandwidth_bytes_per_s, "
                    "fixed_overhead_seconds, record) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    row,
                )
                return None

        with self._lock:
            existing = self._run(insert_once, what="write to", retry=False)
        if existing is None:
            return stored, False
        if existing[0] != fingerprint:
            raise IdempotencyConflict(key)
        return self._load(key, existing[1]), True

    def _load(self, calibration_id: str, text: str) -> Calibration:
        try:
            return Calibration.model_validate_json(text)
        except ValidationError as exc:
            raise StoreError(f"stored calibration {calibration_id} is unreadable: {exc}") from exc

    def get(self, calibration_id: str) -> Calibration | None:
        def select(conn: psycopg.Connection[Any]) -> tuple[Any, ...] | None:
            return conn.execute(
                "SELECT id, record FROM calibrations WHERE id = %s", (calibration_id,)
            ).fetchone()

        with self._lock:
            row = self._run(select, what="read")
        return self._load(row[0], row[1]) if row else None

    def list(self, limit: int = 50, offset: int = 0) -> builtins.list[Calibration]:
        if not 1 <= limit <= MAX_LIST_LIMIT or offset < 0:
            raise ValueError(f"limit must be 1..{MAX_LIST_LIMIT} and offset >= 0")

        def select(conn: psycopg.Connection[Any]) -> builtins.list[tuple[Any, ...]]:
            return conn.execute(
                "SELECT id, record FROM calibrations ORDER BY seq DESC LIMIT %s OFFSET %s",
                (limit, offset),
            ).fetchall()

        with self._lock:
            rows = self._run(select, what="read")
        return [self._load(r[0], r[1]) for r in rows]

    def ping(self) -> None:
        def probe(conn: psycopg.Connection[Any]) -> None:
            conn.execute("SELECT 1 FROM calibrations LIMIT 1").fetchall()

        with self._lock:
            self._run(probe, what="reach")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._drop()

    def __enter__(self) -> PgStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
