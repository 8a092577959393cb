"""Calibration records: SQLite under the data dir, behind a small interface.

Durability: WAL journal with `synchronous=FULL`, so each commit is fsynced to the WAL before
`add` returns; a record acknowledged (HTTP 201) survives a crash or power loss (sqlite.org
pragma.html#pragma_synchronous: NORMAL in WAL mode may lose the last commits on power loss).
One connection, serialised by a lock: calibration writes are rare, and callers reach the store
from worker threads (`def` endpoints, `anyio.to_thread`), never from the event loop.

The schema is numbered in a `schema_version` table (shared with the PostgreSQL backend,
`planner.store_pg`, which `open_store` picks for a `postgresql://` URL) and mirrored in
SQLite's `PRAGMA user_version`; `MIGRATIONS` upgrades older files and a file newer than this
code is refused rather than misread.
"""

from __future__ import annotations

import builtins
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import ValidationError

from planner.probe.model import Calibration, CalibrationIn

if TYPE_CHECKING:
    from planner.store_pg import PgStore

DB_FILENAME = "kvplan.sqlite"
MAX_LIST_LIMIT = 1000

# (version, statements). Append only: a released migration is never edited.
MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            """CREATE TABLE calibrations (
                seq INTEGER PRIMARY KEY,
                id TEXT NOT NULL UNIQUE,
                measured_at TEXT NOT NULL,
                stored_at TEXT NOT NULL,
                device_name TEXT NOT NULL,
                backend TEXT NOT NULL,
                copy_bandwidth_bytes_per_s REAL NOT NULL,
                decode_bandwidth_bytes_per_s REAL NOT NULL,
                fixed_overhead_seconds REAL NOT NULL,
                record TEXT NOT NULL
            )""",
            "CREATE INDEX calibrations_device ON calibrations (device_name, measured_at)",
        ),
    ),
    (
        2,
        (
            # Idempotency-Key of POST /calibrations: a retried write returns the first record.
            """CREATE TABLE idempotency_keys (
                key TEXT PRIMARY KEY,
                fingerprint TEXT NOT NULL,
                calibration_id TEXT NOT NULL,
                created_at TEXT NOT NULL
            )""",
        ),
    ),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


class StoreError(RuntimeError):
    """The store cannot be opened, read or written; the message names the file and the fix."""


class IdempotencyConflict(Exception):
    """An idempotency key already stored with a different request body."""


@runtime_checkable
class CalibrationStore(Protocol):
    """What the API, CLI and planner need of a calibration store (SQLite or PostgreSQL)."""

    def add(self, record: CalibrationIn) -> Calibration:
        """Store durably (committed before returning); the result carries `id` and `measured_at`."""
        ...

    def add_once(
        self, record: CalibrationIn, key: str, fingerprint: str
    ) -> tuple[Calibration, bool]:
        """`add` under an idempotency key: (the record, False) the first time; (the record
        first stored under `key`, True) for the same `fingerprint` again;
        `IdempotencyConflict` for another fingerprint. Key and record commit together."""
        ...

    def get(self, calibration_id: str) -> Calibration | None: ...

    def list(self, limit: int = 50, offset: int = 0) -> builtins.list[Calibration]:
        """Newest first."""
        ...

    def ping(self) -> None:
        """Raise StoreError unless the store answers a trivial query."""
        ...

    def close(self) -> None: ...


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat()


def apply_migrations(
    execute: Callable[..., Any],
    current: int,
    migrations: tuple[tuple[int, tuple[str, ...]], ...],
    record_version_sql: str,
    where: str,
    setting: str,
) -> None:
    """Bring a store from schema `current` to SCHEMA_VERSION inside the caller's transaction,
    the same way on both backends: each passes its own spelling of the DDL (`migrations`) and
    `record_version_sql`, which inserts (version, applied_at) in the driver's parameter style."""
    if current > SCHEMA_VERSION:
        raise StoreError(
            f"{where} has schema version {current}, newer than this kvplan understands "
            f"({SCHEMA_VERSION}); upgrade kvplan or point {setting} elsewhere"
        )
    if current == 0:
        execute(
            "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
    for version, statements in migrations:
        if version <= current:
            continue
        for sql in statements:
            execute(sql)  # literal DDL, no parameters
        execute(record_version_sql, (version, _iso(datetime.now(UTC))))


def new_record_row(record: CalibrationIn) -> tuple[Calibration, tuple[Any, ...]]:
    """A new calibration (fresh id, measured now unless given) and its row, in the column order
    both backends share (id, measured_at, stored_at, device, backend, copy, decode, t0, json)."""
    now = datetime.now(UTC)
    stored = Calibration.model_validate(
        {**record.model_dump(), "id": uuid.uuid4().hex, "measured_at": record.measured_at or now}
    )
    row = (
        stored.id,
        _iso(stored.measured_at),
        _iso(now),
        stored.device_name,
        stored.backend,
        stored.copy_bandwidth_bytes_per_s,
        stored.decode_bandwidth_bytes_per_s,
        stored.fixed_overhead_seconds,
        stored.model_dump_json(),
    )
    return stored, row


class Store:
    """SQLite calibration store: one file in the data dir (KVPLAN_DATA_DIR), WAL, FULL sync."""

    def __init__(
        self, data_dir: Path | str, *, filename: str = DB_FILENAME, timeout_seconds: float = 10.0
    ) -> None:
        """Open (creating if needed) `data_dir/filename` and bring its schema up to date."""
        self.path = Path(data_dir) / filename
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn: sqlite3.Connection | None = sqlite3.connect(
                self.path,
                timeout=timeout_seconds,
                isolation_level=None,  # explicit BEGIN/COMMIT below
                check_same_thread=False,  # guarded by self._lock
            )
            mode = self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(
                    f"{self.path}: SQLite refused WAL mode (got {mode!r}); put KVPLAN_DATA_DIR "
                    "on a local filesystem (not NFS)"
                )
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
            self._identity = self._file_identity()
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(
                f"cannot open the calibration store {self.path}: {exc}; check that "
                "KVPLAN_DATA_DIR exists and is writable by this user"
            ) from exc

    # -- schema ----------------------------------------------------------------------------

    def _version(self, conn: sqlite3.Connection) -> int:
        exists = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_version'"
        ).fetchone()
        if not exists:
            return 0
        row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        return int(row[0] or 0)

    def _migrate(self) -> None:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            apply_migrations(
                conn.execute,
                self._version(conn),
                MIGRATIONS,
                "INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                f"{self.path}",
                "KVPLAN_DATA_DIR",
            )
            # user_version is a plain integer in the file header; it cannot be bound.
            conn.execute(f"PRAGMA user_version = {int(SCHEMA_VERSION)}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def schema_version(self) -> int:
        with self._lock:
            return self._version(self._connection())

    # -- records ---------------------------------------------------------------------------

    def _file_identity(self) -> tuple[int, int]:
        st = os.stat(self.path)
        return st.st_dev, st.st_ino

    def _check_file(self) -> None:
        """The open connection still writes to the file at `self.path`. SQLite keeps writing
        to a deleted (unlinked) file without an error, and every such commit is lost at the next
        start; a replaced file is not the one this process holds either."""
        try:
            identity = self._file_identity()
        except OSError as exc:
            raise StoreError(
                f"the calibration store {self.path} has vanished ({exc.strerror}); writes made "
                "now would be lost at restart. Restore the file (or KVPLAN_DATA_DIR) and "
                "restart kvplan"
            ) from None
        if identity != self._identity:
            raise StoreError(
                f"the calibration store {self.path} was replaced by another file under this "
                "process; restart kvplan to open it"
            )
        if not os.access(self.path, os.W_OK):
            raise StoreError(f"the calibration store {self.path} is not writable by this user")

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"the calibration store {self.path} is closed")
        return self._conn

    def add(self, record: CalibrationIn) -> Calibration:
        stored, _ = self._write(record, None, None)
        return stored

    def add_once(
        self, record: CalibrationIn, key: str, fingerprint: str
    ) -> tuple[Calibration, bool]:
        return self._write(record, key, fingerprint)

    def _write(
        self, record: CalibrationIn, key: str | None, fingerprint: str | None
    ) -> tuple[Calibration, bool]:
        stored, row = new_record_row(record)
        with self._lock:
            conn = self._connection()
            self._check_file()
            try:
                conn.execute("BEGIN IMMEDIATE")
                if key is not None:
                    found = conn.execute(
                        "SELECT k.fingerprint, c.record FROM idempotency_keys k "
                        "JOIN calibrations c ON c.id = k.calibration_id WHERE k.key = ?",
                        (key,),
                    ).fetchone()
                    if found is not None:
                        conn.execute("ROLLBACK")
                        if found[0] != fingerprint:
                            raise IdempotencyConflict(key)
                        return self._load(key, found[1]), True
                conn.execute(
                    "INSERT INTO calibrations (id, measured_at, stored_at, device_name, backend, "
                    "copy_bandwidth_bytes_per_s, decode_bandwidth_bytes_per_s, "
                    "fixed_overhead_seconds, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    row,
                )
                if key is not None:
                    conn.execute(
                        "INSERT INTO idempotency_keys (key, fingerprint, calibration_id, "
                        "created_at) VALUES (?, ?, ?, ?)",
                        (key, fingerprint, stored.id, row[2]),
                    )
                conn.execute("COMMIT")  # synchronous=FULL: fsynced before this returns
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise StoreError(f"cannot write to {self.path}: {exc}") from exc
        return stored, False

    def _load(self, calibration_id: str, text: str) -> Calibration:
        try:
            return Calibration.model_validate_json(text)
        except ValidationError as exc:
            raise StoreError(f"stored calibration {calibration_id} is unreadable: {exc}") from exc

    def get(self, calibration_id: str) -> Calibration | None:
        with self._lock:
            try:
                row = (
                    self._connection()
                    .execute("SELECT id, record FROM calibrations WHERE id = ?", (calibration_id,))
                    .fetchone()
                )
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read {self.path}: {exc}") from exc
        return self._load(row[0], row[1]) if row else None

    def list(self, limit: int = 50, offset: int = 0) -> builtins.list[Calibration]:
        if not 1 <= limit <= MAX_LIST_LIMIT or offset < 0:
            raise ValueError(f"limit must be 1..{MAX_LIST_LIMIT} and offset >= 0")
        with self._lock:
            try:
                rows = (
                    self._connection()
                    .execute(
                        "SELECT id, record FROM calibrations ORDER BY seq DESC LIMIT ? OFFSET ?",
                        (limit, offset),
                    )
                    .fetchall()
                )
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read {self.path}: {exc}") from exc
        return [self._load(r[0], r[1]) for r in rows]

    def pragma(self, name: str) -> str | int:
        """A PRAGMA's current value (for readiness checks and tests)."""
        if not name.isidentifier():
            raise ValueError(f"not a pragma name: {name!r}")
        with self._lock:
            value: str | int = self._connection().execute(f"PRAGMA {name}").fetchone()[0]
        return value

    def ping(self) -> None:
        """Readable, and still the file at `self.path` (writable): see `_check_file`."""
        with self._lock:
            conn = self._connection()
            self._check_file()
            try:
                conn.execute("SELECT 1 FROM calibrations LIMIT 1").fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"calibration store {self.path} does not answer: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(data_dir: Path | str, database_url: str | None = None) -> Store | PgStore:
    """The configured store: PostgreSQL for a `postgresql://` URL, else SQLite in `data_dir`."""
    if database_url:
        scheme = database_url.split("://", 1)[0].lower() if "://" in database_url else ""
        if scheme not in ("postgresql", "postgres"):
            raise StoreError(
                f"KVPLAN_DATABASE_URL must be a postgresql://user:password@host:port/dbname URL "
                f"(got scheme {scheme or 'none'!r}); unset it to use SQLite in KVPLAN_DATA_DIR"
            )
        try:
            from planner.store_pg import PgStore  # psycopg is the optional `postgres` extra
        except ImportError as exc:
            raise StoreError(
                f"KVPLAN_DATABASE_URL needs psycopg ({exc}); pip install 'kvplan[postgres]'"
            ) from None
        return PgStore(database_url)
    return Store(data_dir)


def open_store_from_env() -> Store | PgStore:
    """The store named by KVPLAN_DATA_DIR / KVPLAN_DATABASE_URL (for the CLI)."""
    from planner.settings import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError as exc:
        raise StoreError(str(exc)) from None
    url = settings.database_url.get_secret_value() if settings.database_url else None
    return open_store(settings.data_dir, url)
