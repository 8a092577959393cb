"""A loopback HTTP server with the Hugging Face Hub's layout, for the real `huggingface_hub`
client pointed at it through HF_ENDPOINT (no mocking of the client).

What it serves follows the Hub's protocol as the client needs it:

- `GET /api/models/{repo}[/revision/{rev}]`: model info (id, sha, gated, siblings); public
  even for gated repos;
- `HEAD`/`GET /{repo}/resolve/{rev}/{file}`: regular files answer 200/206 with X-Repo-Commit,
  ETag, Content-Length and Accept-Ranges; `.safetensors` files are LFS: a 302 to a CDN path
  with X-Repo-Commit, X-Linked-Etag and X-Linked-Size; ranges give 206 + Content-Range, an
  unsatisfiable one 416;
- errors carry X-Error-Code: RepoNotFound (401 anonymous, 404 with a token), GatedRepo (401
  without a token, 403 with a token lacking access), EntryNotFound (404), RevisionNotFound.

Every request is recorded (method, path, Range, Authorization) for the tests to inspect.

Hostile modes (`HubState.modes[repo_id]`, or `HubState.mode` for every repo) answer as an
attacker's Hub would: `slow` (every answer 0.3 s late: a healthy Hub far away), `drip` (every
byte of the answer 0.3 s apart), `stall` (never answers), `429` (RateLimit t=25 and
Retry-After: 25), `503` (Retry-After: 25), `huge` (config.json announced at 256 MiB),
`huge_chunked` (config.json streamed without a length, never ending), `not_json` and
`wrong_types` (model info), `bad_sha` (a commit of `../../..` in model info and X-Repo-Commit),
`bad_etag` (an ETag of `../../../evil`), `redirect` (config.json redirected to
`HubState.redirect_to`, another port), `gzip_bomb` (model info inflating to 64 MiB).
`black_hole()` is an address whose SYNs are dropped.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

GOOD_TOKEN = "hf_loopback_token_with_access"


def safetensors_bytes(tensors: dict[str, tuple[str, list[int]]]) -> bytes:
    """A real safetensors file: u64 header size, JSON header, zero-filled tensor data."""
    sizes = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "U8": 1, "F8_E4M3": 1}
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for dim in shape:
            n *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the format pads the header to 8 bytes
    return struct.pack("<Q", len(raw)) + raw + b"\0" * offset


@dataclass
class Repo:
    files: dict[str, bytes]
    gated: bool = False
    sha: str = "0" * 40
    revisions: set[str] = field(default_factory=lambda: {"main"})


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    authorization: str | None


class HubState:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.modes: dict[str, str] = {}
        self.mode: str | None = None
        self.redirect_to: str | None = None
        self.stop = threading.Event()  # set at shutdown: stalled answers end

    def mode_of(self, repo_id: str | None) -> str | None:
        return self.modes.get(repo_id or "", self.mode)

    def add(self, repo_id: str, repo: Repo) -> None:
        if repo.sha == "0" * 40:
            repo.sha = hashlib.sha1(repo_id.encode()).hexdigest()
        repo.revisions.add(repo.sha)
        self.repos[repo_id] = repo


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    # -- helpers --------------------------------------------------------------------------

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        if getattr(self, "_drip", False):
            self._drip_send(status, body, headers or {})
            return
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, code: str, msg: str, extra: dict[str, str] | None = None) -> None:
        body = json.dumps({"error": msg}).encode()
        headers = {"X-Error-Code": code, "X-Error-Message": msg, "Content-Type": "application/json"}
        self._send(status, body, {**headers, **(extra or {})})

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization")
        return auth.split(" ", 1)[1] if auth and auth.startswith("Bearer ") else None

    def _record(self) -> None:
        with self.server.state.lock:
            self.server.state.requests.append(
                Request(
                    self.command,
                    urlsplit(self.path).path,
                    self.headers.get("Range"),
                    self.headers.get("Authorization"),
                )
            )

    def _repo_or_error(self, repo_id: str) -> Repo | None:
        repo = self.server.state.repos.get(repo_id)
        if repo is None:
            # The Hub answers 401 to anonymous callers, 404 with a token (no existence leak).
            status = 404 if self._token() else 401
            self._error(status, "RepoNotFound", "Repository Not Found")
        return repo

    def _serve_bytes(self, data: bytes, headers: dict[str, str]) -> None:
        rng = self.headers.get("Range")
        base = {**headers, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
            if not m or int(m.group(1)) >= len(data):
                self._send(416, b"", {**base, "Content-Range": f"bytes */{len(data)}"})
                return
            start = int(m.group(1))
            end = min(int(m.group(2)) if m.group(2) else len(data) - 1, len(data) - 1)
            chunk = data[start : end + 1]
            self._send(206, chunk, {**base, "Content-Range": f"bytes {start}-{end}/{len(data)}"})
            return
        self._send(200, data, base)

    def _drip_send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        lines = [f"HTTP/1.1 {status} X", *(f"{k}: {v}" for k, v in headers.items())]
        lines.append(f"Content-Length: {len(body)}")
        raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + (b"" if self.command == "HEAD" else body)
        for i in range(len(raw)):
            if self.server.state.stop.wait(0.3):
                return
            try:
                self.wfile.write(raw[i : i + 1])
                self.wfile.flush()
            except OSError:
                return
        self.close_connection = True

    def _hostile(self, mode: str, repo_id: str, what: str) -> bool:
        """Answer as the hostile mode does; False when this request is served normally."""
        state = self.server.state
        if mode == "drip":
            self._drip = True
            return False
        if mode == "slow":  # a healthy Hub far away: every answer 0.3 s late
            state.stop.wait(0.3)
            return False
        if mode == "stall":
            state.stop.wait(60)
            self.close_connection = True
            return True
        if mode in ("429", "503"):
            extra = {"Retry-After": "25"}
            if mode == "429":
                extra["RateLimit"] = '"api";r=0;t=25'
                extra["RateLimit-Policy"] = '"fixed window";"api";q=500;w=300'
            self._error(int(mode), "RateLimited", "slow down", extra)
            return True
        if what == "info" and mode == "gzip_bomb":
            import gzip

            bomb = gzip.compress(b"[" + b" " * (64 << 20) + b"]")  # 64 KiB on the wire
            self._send(200, bomb, {"Content-Type": "application/json", "Content-Encoding": "gzip"})
            return True
        if what == "info" and mode == "not_json":
            self._send(200, b"<html>not json</html>", {"Content-Type": "application/json"})
            return True
        if what == "info" and mode == "wrong_types":
            body = json.dumps({"id": repo_id, "sha": 5, "siblings": "config.json", "gated": []})
            self._send(200, body.encode(), {"Content-Type": "application/json"})
            return True
        if what == "info" and mode == "bad_sha":
            body = {
                "id": repo_id,
                "sha": "../../../../tmp",
                "siblings": [{"rfilename": "config.json"}],
            }
            self._send(200, json.dumps(body).encode(), {"Content-Type": "application/json"})
            return True
        if what == "config":
            sha = state.repos[repo_id].sha if repo_id in state.repos else "0" * 40
            if mode == "huge":
                self.send_response(200)
                for k, v in {
                    "X-Repo-Commit": sha,
                    "ETag": '"' + "a" * 40 + '"',
                    "Content-Length": str(256 << 20),
                }.items():
                    self.send_header(k, v)
                self.end_headers()
                if self.command != "HEAD":
                    self._stream_zeros(256 << 20)
                return True
            if mode == "huge_chunked":
                self.send_response(200)
                self.send_header("X-Repo-Commit", sha)
                self.send_header("ETag", '"' + "b" * 40 + '"')
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                if self.command != "HEAD":
                    self._stream_zeros(None)
                return True
            if mode == "bad_sha":
                self._send(200, b"{}", {"X-Repo-Commit": "../../../../tmp/evil", "ETag": '"ab"'})
                return True
            if mode == "bad_etag":
                self._send(200, b"{}", {"X-Repo-Commit": sha, "ETag": '"../../../../evil"'})
                return True
            if mode == "redirect" and state.redirect_to:
                self._send(
                    302,
                    b"",
                    {
                        "Location": state.redirect_to + self.path,
                        "X-Repo-Commit": sha,
                        "ETag": '"' + "c" * 40 + '"',
                    },
                )
                return True
        return False

    def _stream_zeros(self, total: int | None) -> None:
        chunk = b"\0" * (1 << 16)
        sent = 0
        try:
            while (total is None or sent < total) and not self.server.state.stop.is_set():
                if total is None:
                    self.wfile.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                else:
                    self.wfile.write(chunk[: total - sent])
                sent += len(chunk)
        except OSError:
            pass
        self.close_connection = True

    # -- routes ---------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        self._record()
        self._drip = False
        path = unquote(urlsplit(self.path).path)
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+?)(?:/revision/(.+))?", path) or re.fullmatch(
            r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path
        )
        if m:
            repo_id = m.group(1)
            mode = self.server.state.mode_of(repo_id)
            what = (
                "info"
                if path.startswith("/api/")
                else ("config" if m.group(3) == "config.json" else "file")
            )
            if mode is not None and self._hostile(mode, repo_id, what):
                return
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+?)(?:/revision/(.+))?", path)
        if m:
            self._model_info(m.group(1), m.group(2))
            return
        m = re.fullmatch(r"/cdn/([^/]+/[^/]+)/([0-9a-f]{40})/(.+)", path)
        if m:
            repo = self.server.state.repos.get(m.group(1))
            if repo is None or m.group(3) not in repo.files:
                self._send(404)
                return
            data = repo.files[m.group(3)]
            self._serve_bytes(data, {"ETag": f'"{hashlib.sha256(data).hexdigest()}"'})
            return
        m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if m:
            self._resolve(m.group(1), m.group(2), m.group(3))
            return
        self._send(404)

    def _model_info(self, repo_id: str, revision: str | None) -> None:
        repo = self._repo_or_error(repo_id)
        if repo is None:
            return
        if revision is not None and revision not in repo.revisions:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return
        siblings = [{"rfilename": name} for name in sorted(repo.files)]
        info = {
            "id": repo_id,
            "modelId": repo_id,
            "sha": repo.sha,
            "gated": "manual" if repo.gated else False,
            "private": False,
            "siblings": siblings,
        }
        self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"})

    def _resolve(self, repo_id: str, revision: str, filename: str) -> None:
        repo = self._repo_or_error(repo_id)
        if repo is None:
            return
        if repo.gated:
            token = self._token()
            if token is None:
                self._error(401, "GatedRepo", "Access to this gated repo is restricted")
                return
            if token != GOOD_TOKEN:
                self._error(403, "GatedRepo", "Your token has no access to this gated repo")
                return
        if revision not in repo.revisions:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return
        if filename not in repo.files:
            self._error(404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": repo.sha})
            return
        data = repo.files[filename]
        if filename.endswith(".safetensors"):
            # LFS: the metadata rides on the redirect; the bytes come from the CDN path.
            host, port = self.server.server_address[:2]
            self._send(
                302,
                b"",
                {
                    "Location": f"http://{host}:{port}/cdn/{repo_id}/{repo.sha}/{filename}",
                    "X-Repo-Commit": repo.sha,
                    "X-Linked-Etag": f'"{hashlib.sha256(data).hexdigest()}"',
                    "X-Linked-Size": str(len(data)),
                    "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                },
            )
            return
        etag = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        self._serve_bytes(data, {"X-Repo-Commit": repo.sha, "ETag": f'"{etag}"'})


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: HubState) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state


@contextmanager
def black_hole() -> Iterator[str]:
    """An endpoint URL whose connections never complete: a listener with a full accept queue
    and no accept(), so the kernel drops further SYNs (as a firewall that drops does)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):  # fill the accept queue (its length is backlog + 1)
        c = socket.socket()
        c.setblocking(False)
        try:
            c.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(c)
    time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for c in fillers:
            c.close()
        listener.close()


@contextmanager
def hub_server(state: HubState) -> Iterator[str]:
    """Serve `state` on a free loopback port; yields the endpoint URL."""
    server = _Server(state)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host!s}:{port}"
    finally:
        state.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
