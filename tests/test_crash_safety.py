"""Crash safety and replicas, on a real `kvplan serve` process, for SQLite and PostgreSQL.

- SIGKILL mid-stream: writers post calibrations continuously; the server is killed while
  requests are in flight, restarted on the same store, and every calibration it acknowledged
  (201 with an id) must be there, intact, and the database must pass its own integrity check
  (SQLite `PRAGMA integrity_check`; PostgreSQL amcheck plus a full parse of every row).
- Two servers on one PostgreSQL see each other's calibrations (the replica deployment).
"""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from planner.app import create_app
from planner.settings import Settings
from planner.store import SCHEMA_VERSION, StoreError
from tests.live_server import AUTH, LiveServer
from tests.store_backends import Backend

WRITERS = 4
ACKS_BEFORE_KILL = 40
ACK_TIMEOUT_SECONDS = 60.0


def record(name: str) -> dict[str, object]:
    return {
        "device_name": name,
        "backend": "sdpa-flash",
        "copy_bandwidth_bytes_per_s": 4.3e12,
        "decode_bandwidth_bytes_per_s": 4.0e12,
        "fixed_overhead_seconds": 2e-5,
    }


class Writers:
    """Threads that post until told to stop; `acked` maps id → device_name of each 201."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.acked: dict[str, str] = {}
        self.failures = 0
        self.lock = threading.Lock()
        self.enough = threading.Event()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,)) for i in range(WRITERS)]

    def _run(self, writer: int) -> None:
        with httpx.Client(base_url=self.url, headers=AUTH, timeout=10.0) as client:
            n = 0
            while not self.stop.is_set():
                name = f"crash-{writer}-{n}"
                n += 1
                try:
                    resp = client.post("/api/v1/calibrations", json=record(name))
                except httpx.HTTPError:
                    with self.lock:
                        self.failures += 1
                    continue
                if resp.status_code == 201:
                    with self.lock:
                        self.acked[resp.json()["id"]] = name
                        if len(self.acked) >= ACKS_BEFORE_KILL:
                            self.enough.set()

    def __enter__(self) -> Writers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)


def test_sigkill_mid_stream_loses_no_acknowledged_calibration(
    backend: Backend, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    server = LiveServer(backend.server_env(), log)
    try:
        with Writers(server.url) as writers:
            assert writers.enough.wait(ACK_TIMEOUT_SECONDS), server.log()
            server.kill()  # the writers are mid-request: some posts never get an answer
            assert server.proc.returncode == -9
            writers.stop.set()
    finally:
        server.stop()
    acked = dict(writers.acked)
    assert len(acked) >= ACKS_BEFORE_KILL

    with LiveServer(backend.server_env(), log) as again, httpx.Client(base_url=again.url) as c:
        for calibration_id, name in acked.items():
            resp = c.get(f"/api/v1/calibrations/{calibration_id}")
            assert resp.status_code == 200, (calibration_id, resp.text)
            assert resp.json()["device_name"] == name
        # The restarted server writes too.
        assert c.post("/api/v1/calibrations", json=record("after"), headers=AUTH).status_code == 201

    assert backend.integrity_problems() == []
    stored = backend.open().list(limit=1000)
    assert set(acked) <= {c.id for c in stored}


def test_two_servers_on_one_postgresql_see_each_others_calibrations(
    pg_schema_url: str, tmp_path: Path
) -> None:
    backend = Backend("postgresql", tmp_path, pg_schema_url)
    env = backend.server_env()
    # Both start on an empty schema at once: the migration lock lets one of them create it.
    starters: list[LiveServer] = []
    errors: list[BaseException] = []

    def start(name: str) -> None:
        try:
            starters.append(LiveServer(env, tmp_path / f"{name}.log"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    try:
        assert not errors, errors
        a, b = starters
        with (
            httpx.Client(base_url=a.url, headers=AUTH) as ca,
            httpx.Client(base_url=b.url, headers=AUTH) as cb,
        ):
            from_a = ca.post("/api/v1/calibrations", json=record("from-a")).json()
            from_b = cb.post("/api/v1/calibrations", json=record("from-b")).json()
            assert cb.get(f"/api/v1/calibrations/{from_a['id']}").json() == from_a
            assert ca.get(f"/api/v1/calibrations/{from_b['id']}").json() == from_b
            for client in (ca, cb):
                listed = [c["id"] for c in client.get("/api/v1/calibrations").json()["items"]]
                assert listed == [from_b["id"], from_a["id"]]
            assert backend.sql("SELECT COUNT(*) FROM schema_version") == [(SCHEMA_VERSION,)]
    finally:
        for server in starters:
            server.stop()


def test_app_with_unreachable_database_fails_to_start(tmp_path: Path) -> None:
    url = "postgresql://kvplan:s3cret-pw@127.0.0.1:1/none?connect_timeout=2"
    app = create_app(Settings(data_dir=tmp_path, database_url=url))
    with pytest.raises(StoreError) as info, TestClient(app):
        pass  # the lifespan opens the store: start-up fails, so the pod never turns ready
    assert "s3cret-pw" not in str(info.value)
