"""Calibration store, against both backends (SQLite, PostgreSQL): one interface, one schema,
records survive restarts and a killed process (research/style_and_reliability.md B.10).

The `backend` fixture (tests/store_backends.py) runs each test on SQLite in tmp_path and on the
PostgreSQL of KVPLAN_TEST_DATABASE_URL in a fresh schema; SQLite-only behaviour (pragmas, the
file) is tested on `Store` directly.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from planner import store_pg
from planner.probe import Calibration, CalibrationIn
from planner.store import (
    DB_FILENAME,
    MIGRATIONS,
    SCHEMA_VERSION,
    CalibrationStore,
    Store,
    StoreError,
    open_store,
)
from tests.store_backends import Backend

RECORD = CalibrationIn(
    device_name="NVIDIA H200",
    backend="sdpa-flash",
    copy_bandwidth_bytes_per_s=4.3e12,
    decode_bandwidth_bytes_per_s=4.0e12,
    fixed_overhead_seconds=2e-5,
    flags=["gpu_figures"],
    environment={"sm_count": 132, "l2_cache_bytes": 52428800},
)


@pytest.fixture
def store(backend: Backend) -> Any:
    return backend.open()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path)
    yield s
    s.close()


# --- both backends ----------------------------------------------------------------------------


def test_store_satisfies_the_interface(store: Any) -> None:
    assert isinstance(store, CalibrationStore)


def test_open_store_picks_the_backend(backend: Backend, store: Any) -> None:
    expected = store_pg.PgStore if backend.name == "postgresql" else Store
    assert type(store) is expected


def test_schema_version(store: Any) -> None:
    assert store.schema_version() == SCHEMA_VERSION == 2  # calibrations, idempotency keys


def test_same_tables_and_columns_in_both_backends(backend: Backend, store: Any) -> None:
    if backend.name == "sqlite":
        columns = [r[1] for r in backend.sql("PRAGMA table_info(calibrations)")]
        tables = {r[0] for r in backend.sql("SELECT name FROM sqlite_master WHERE type='table'")}
    else:
        columns = [
            r[0]
            for r in backend.sql(
                "SELECT column_name FROM information_schema.columns WHERE table_name = "
                "'calibrations' AND table_schema = current_schema() ORDER BY ordinal_position"
            )
        ]
        tables = {
            r[0]
            for r in backend.sql(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()"
            )
        }
    assert tables == {"schema_version", "calibrations", "idempotency_keys"}
    assert columns == [
        "seq",
        "id",
        "measured_at",
        "stored_at",
        "device_name",
        "backend",
        "copy_bandwidth_bytes_per_s",
        "decode_bandwidth_bytes_per_s",
        "fixed_overhead_seconds",
        "record",
    ]


def test_migrations_move_together() -> None:
    assert [v for v, _ in MIGRATIONS] == [v for v, _ in store_pg.MIGRATIONS]


def test_add_returns_the_stored_record(store: Any) -> None:
    stored = store.add(RECORD)
    assert isinstance(stored, Calibration)
    assert stored.id
    assert stored.measured_at.tzinfo is not None
    assert stored.model_dump(exclude={"id", "measured_at"}) == RECORD.model_dump(
        exclude={"measured_at"}
    )
    assert store.get(stored.id) == stored


def test_measured_at_from_the_record_is_kept(store: Any) -> None:
    when = datetime(2025, 1, 31, 12, 0, tzinfo=UTC)
    stored = store.add(RECORD.model_copy(update={"measured_at": when}))
    assert stored.measured_at == when
    assert store.get(stored.id) == stored


def test_unknown_id_is_none(store: Any) -> None:
    assert store.get("0" * 32) is None


def test_list_is_newest_first_and_paged(store: Any) -> None:
    ids = [store.add(RECORD.model_copy(update={"device_name": f"gpu{i}"})).id for i in range(5)]
    assert [c.id for c in store.list()] == ids[::-1]
    assert [c.id for c in store.list(limit=2, offset=1)] == ids[::-1][1:3]
    assert store.list(limit=10, offset=5) == []
    with pytest.raises(ValueError):
        store.list(limit=0)


def test_restart_keeps_records(backend: Backend) -> None:
    first = backend.open()
    stored = first.add(RECORD)
    first.close()
    again = backend.open()
    assert again.get(stored.id) == stored
    assert again.schema_version() == SCHEMA_VERSION  # migrations ran once
    assert backend.sql("SELECT COUNT(*) FROM schema_version") == [(SCHEMA_VERSION,)]


def test_two_stores_on_one_database_see_each_other(backend: Backend) -> None:
    a, b = backend.open(), backend.open()
    from_a = a.add(RECORD.model_copy(update={"device_name": "a"}))
    from_b = b.add(RECORD.model_copy(update={"device_name": "b"}))
    assert b.get(from_a.id) == from_a
    assert a.get(from_b.id) == from_b
    assert [c.id for c in a.list()] == [from_b.id, from_a.id]


def test_acknowledged_record_survives_a_killed_process(backend: Backend) -> None:
    code = textwrap.dedent(
        f"""
        import os, signal, sys
        from planner.probe import CalibrationIn
        from planner.store import open_store
        store = open_store(sys.argv[1], os.environ.get("KVPLAN_DATABASE_URL") or None)
        record = CalibrationIn.model_validate_json({RECORD.model_dump_json()!r})
        print(store.add(record).id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no close(), no checkpoint
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(backend.tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **backend.server_env()},
    )
    assert proc.returncode == -9, proc.stderr
    stored_id = proc.stdout.strip()
    found = backend.open().get(stored_id)
    assert found is not None and found.device_name == RECORD.device_name
    assert backend.integrity_problems() == []


def test_newer_schema_is_refused(backend: Backend) -> None:
    backend.open().close()
    backend.sql("INSERT INTO schema_version VALUES (99, '2099-01-01')")
    with pytest.raises(StoreError, match="newer"):
        backend.open()


def test_closed_store_says_so(backend: Backend) -> None:
    s = backend.open()
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.get("x")
    with pytest.raises(StoreError):
        s.ping()
    with pytest.raises(StoreError, match="closed"):
        s.add(RECORD)


def test_ping(store: Any) -> None:
    store.ping()


def test_integrity_check_passes_on_a_fresh_store(backend: Backend, store: Any) -> None:
    store.add(RECORD)
    assert backend.integrity_problems() == []


# --- PostgreSQL only --------------------------------------------------------------------------


def test_pg_commits_synchronously(pg_schema_url: str) -> None:
    with store_pg.PgStore(pg_schema_url) as s:
        setting = s._run(
            lambda conn: conn.execute("SHOW synchronous_commit").fetchone(), what="read"
        )
    assert setting == ("on",)


def test_pg_reconnects_after_the_server_drops_the_connection(pg_schema_url: str) -> None:
    backend = Backend("postgresql", Path("."), pg_schema_url)
    with store_pg.PgStore(pg_schema_url) as s:
        stored = s.add(RECORD)
        # What a server restart or failover does to an open session.
        backend.sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'kvplan' AND pid <> pg_backend_pid()"
        )
        assert s.get(stored.id) == stored  # a read retries once on a new connection
        s.ping()


def test_unreachable_pg_is_a_store_error_without_the_password() -> None:
    url = "postgresql://kvplan:s3cret-pw@127.0.0.1:1/kvplan?connect_timeout=2"
    with pytest.raises(StoreError) as info:
        open_store("unused", url)
    message = str(info.value)
    assert "s3cret-pw" not in message
    assert "postgresql://kvplan@127.0.0.1:1/kvplan" in message
    assert "KVPLAN_DATABASE_URL" in message


@pytest.mark.parametrize("url", ["mysql://db/kvplan", "sqlite:///x.db", "db.example:5432"])
def test_other_database_urls_are_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(StoreError, match="postgresql://"):
        open_store(tmp_path, url)


def test_redacted_url() -> None:
    assert (
        store_pg.redacted("postgresql://u:pw@h:5432/db?sslmode=require")
        == "postgresql://u@h:5432/db"
    )


# --- SQLite only ------------------------------------------------------------------------------


def test_wal_full_sync_and_user_version(sqlite_store: Store) -> None:
    assert str(sqlite_store.pragma("journal_mode")).lower() == "wal"
    assert sqlite_store.pragma("synchronous") == 2  # FULL
    assert sqlite_store.pragma("user_version") == SCHEMA_VERSION
    assert sqlite_store.path == sqlite_store.path.parent / DB_FILENAME


def test_unwritable_dir_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="KVPLAN_DATA_DIR"):
        Store(blocker)


def test_no_url_is_sqlite(tmp_path: Path) -> None:
    with open_store(tmp_path) as s:
        assert isinstance(s, Store)
        s.ping()
    with sqlite3.connect(tmp_path / DB_FILENAME) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


# --- idempotency keys (both backends) and a vanished file (SQLite) ----------------------------


def test_same_key_same_body_stores_once(backend: Backend, store: Any) -> None:
    first, replayed = store.add_once(RECORD, "key-1", "fp-a")
    assert not replayed
    again, replayed = store.add_once(RECORD, "key-1", "fp-a")
    assert replayed and again == first
    assert [c.id for c in store.list()] == [first.id]
    # The key survives a restart with its record.
    reopened = backend.open()
    assert reopened.add_once(RECORD, "key-1", "fp-a") == (first, True)


def test_same_key_other_body_is_a_conflict(store: Any) -> None:
    from planner.store import IdempotencyConflict

    store.add_once(RECORD, "key-2", "fp-a")
    with pytest.raises(IdempotencyConflict):
        store.add_once(RECORD, "key-2", "fp-b")
    assert len(store.list()) == 1
    # Another key is another record.
    store.add_once(RECORD, "key-3", "fp-b")
    assert len(store.list()) == 2


def test_deleted_file_refuses_writes_and_pings(sqlite_store: Store) -> None:
    """SQLite keeps writing to an unlinked file without an error: every such write would be
    lost at the next start. The store notices the path no longer holds its file."""
    sqlite_store.add(RECORD)
    for suffix in ("", "-wal", "-shm"):
        Path(str(sqlite_store.path) + suffix).unlink(missing_ok=True)
    with pytest.raises(StoreError, match="vanished"):
        sqlite_store.add(RECORD)
    with pytest.raises(StoreError, match="vanished"):
        sqlite_store.ping()


def test_replaced_file_refuses_writes(sqlite_store: Store, tmp_path: Path) -> None:
    other = Store(tmp_path / "elsewhere")
    other.close()
    sqlite_store.path.unlink()
    os.replace(other.path, sqlite_store.path)
    with pytest.raises(StoreError, match="replaced"):
        sqlite_store.add(RECORD)
