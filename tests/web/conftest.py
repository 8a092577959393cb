"""Fixtures for the HTML page: an in-process client, and for browser tests a live uvicorn server
and Debian's chromium driven by Playwright (skipped where /usr/bin/chromium is absent)."""

from __future__ import annotations

import html.parser
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from planner.app import create_app
from planner.settings import Settings
from tests.work_pool import SharedPool

GiB = 1 << 30

# The 48 GiB question (seed 000 "48 GiB 还能同时接几条请求？", DESIGN.md, issue 4).
QUESTION = {
    "model": "meta-llama/Llama-3.1-8B",
    "kv_cache_dtype": "bf16",
    "context_tokens": "8192",
    "kv_budget_gib": "48",
}
QUESTION_URL = (
    "/?model=meta-llama/Llama-3.1-8B&kv_cache_dtype=bf16&context_tokens=8192&kv_budget_gib=48"
)

# A Llama-3.1-8B-shaped config (seed 004: L=32, Hkv=8, d=128, b=2) whose free-text fields
# carry markup: pasted configs must render inert (issue 4, XSS probe).
XSS_CONFIG_TEXT = """{
  "_name_or_path": "<script>alert('name')</script>",
  "architectures": ["<img src=x onerror=alert('arch')>"],
  "model_type": "<img src=x onerror=alert('type')>",
  "num_hidden_layers": 32,
  "num_attention_heads": 32,
  "num_key_value_heads": 8,
  "hidden_size": 4096,
  "intermediate_size": 14336,
  "vocab_size": 128256,
  "max_position_embeddings": 131072,
  "torch_dtype": "bfloat16"
}"""


@pytest.fixture
def client(tmp_path: Path, shared_pool: SharedPool) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path)
    app = create_app(settings, work_pool=shared_pool.for_settings(settings))
    with TestClient(app, raise_server_exceptions=True) as test_client:
        yield test_client


class Markup(html.parser.HTMLParser):
    """Collects what the CSP and the XSS probe care about: tags, attributes, text by element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.texts: list[tuple[str, str]] = []
        self._stack: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        entry = (tag, dict(attrs))
        self.tags.append(entry)
        if tag not in {"input", "meta", "link", "br", "img", "hr", "rect", "line"}:
            self._stack.append(entry)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i][0] == tag:
                del self._stack[i:]
                break

    def handle_data(self, data: str) -> None:
        if data.strip():
            path = "/".join(t for t, _ in self._stack)
            langs = [a.get("lang") for _, a in self._stack if a.get("lang")]
            self.texts.append((path + ("@" + str(langs[-1]) if langs else ""), data.strip()))

    def by_id(self, element_id: str) -> dict[str, str | None] | None:
        return next((a for _, a in self.tags if a.get("id") == element_id), None)


def parse(text: str) -> Markup:
    parser = Markup()
    parser.feed(text)
    return parser


# ---- browser end-to-end ------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import uvicorn

    app = create_app(Settings(data_dir=tmp_path_factory.mktemp("kvplan-e2e")))
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", server_header=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("uvicorn did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


# Generous: CI runs the browser tests beside two live oracles on 2 cores (a 15 s wait timed out
# once there while the same test takes 10 s alone).
TIMEOUT_MS = 45_000
# Recorded by the page itself; Playwright's init scripts run outside the page's CSP.
CSP_LISTENER = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(e.violatedDirective + " " + e.blockedURI);
});
"""


class Session:
    """One browser context with its console, page errors, dialogs and requests recorded."""

    def __init__(self, browser: Any, base: str, **options: Any) -> None:
        self.base = base
        self.context = browser.new_context(**{"locale": "en-US", **options})
        self.context.add_init_script(CSP_LISTENER)
        self.problems: list[str] = []
        self.dialogs: list[str] = []
        self.foreign: list[str] = []
        self.page = self.new_page()

    def new_page(self) -> Any:
        page = self.context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.on("console", lambda m: m.type == "error" and self.problems.append(m.text))
        page.on("pageerror", lambda e: self.problems.append(f"pageerror: {e}"))

        def on_dialog(dialog: Any) -> None:
            self.dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", on_dialog)
        page.on(
            "request",
            lambda r: r.url.startswith(self.base) or self.foreign.append(r.url),
        )
        return page

    def goto(self, path: str) -> Any:
        return self.page.goto(self.base + path)

    def answer(self) -> str:
        return str(self.page.locator("#answer-hero .sentence").inner_text())

    def check_clean(self) -> None:
        for page in self.context.pages:
            if page.url.startswith(self.base):
                violations = page.evaluate("window.__csp || []")
                assert violations == [], violations
        assert self.problems == [], self.problems
        assert self.dialogs == [], self.dialogs
        assert self.foreign == [], self.foreign


# A phone in portrait, for the checks that a page never scrolls sideways at 360 CSS px.
PHONE: dict[str, Any] = {"viewport": {"width": 360, "height": 740}, "is_mobile": True}


@contextmanager
def browser_session(browser: Any, base: str, **options: Any) -> Iterator[Session]:
    """A Session for one test: checked clean when the test's block ends, closed either way."""
    s = Session(browser, base, **options)
    try:
        yield s
        s.check_clean()
    finally:
        s.context.close()


@pytest.fixture
def session(browser: Any, live_server: str) -> Iterator[Session]:
    with browser_session(browser, live_server) as s:
        yield s
