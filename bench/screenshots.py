"""Screenshots of the answer page at desktop and phone width, for the README.

    python bench/screenshots.py [--out docs]

Serves the app with uvicorn on a free loopback port, drives Debian's chromium with Playwright
(no browser download), and writes docs/screenshot-{desktop,phone}.png (English) and
docs/screenshot-{desktop,phone}-zh.png (Chinese, from the browser's Accept-Language).
"""

from __future__ import annotations

import argparse
import socket
import tempfile
import threading
import time
from pathlib import Path

import uvicorn
from playwright.sync_api import sync_playwright

from planner.app import create_app
from planner.settings import Settings

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
QUESTION = (
    "/?model=meta-llama/Llama-3.1-8B&kv_cache_dtype=bf16&context_tokens=8192"
    "&kv_budget_gib=48&gpu=H100-SXM-80GB"
)
LOCALES = {"en": "en-US", "zh": "zh-CN"}
SHOTS = {
    "desktop": {"viewport": {"width": 1280, "height": 900}, "device_scale_factor": 1},
    "phone": {
        "viewport": {"width": 390, "height": 844},
        "device_scale_factor": 1,
        "is_mobile": True,
        "has_touch": True,
    },
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(port: int) -> uvicorn.Server:
    app = create_app(Settings(data_dir=Path(tempfile.mkdtemp(prefix="kvplan-shots-"))))
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("docs"))
    parser.add_argument("--lang", nargs="+", default=["en", "zh"], choices=sorted(LOCALES))
    parser.add_argument("--full-page", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = serve(port)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for lang in args.lang:
                for name, options in SHOTS.items():
                    context = browser.new_context(locale=LOCALES[lang], **options)
                    page = context.new_page()
                    page.goto(f"http://127.0.0.1:{port}{QUESTION}")
                    page.wait_for_selector("#answer-hero .sentence strong")
                    suffix = "" if lang == "en" else f"-{lang}"
                    path = args.out / f"screenshot-{name}{suffix}.png"
                    page.screenshot(path=str(path), full_page=args.full_page)
                    print(path, path.stat().st_size, "bytes")
                    context.close()
            browser.close()
    finally:
        server.should_exit = True


if __name__ == "__main__":
    main()
