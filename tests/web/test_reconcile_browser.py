"""/reconcile in Debian's chromium: paste a fixture log, read the verdicts; in Chinese; without
JavaScript; pasted markup stays text; no console error or CSP violation along the way."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.conftest import Session, browser_session
from tests.web.test_reconcile_page import GRANITE, GRANITE_LOG

pytestmark = pytest.mark.browser

QWEN3_14B_LOG = (
    "(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [gpu_worker.py:298] Available KV cache "
    "memory: 6.51 GiB\n"
    "(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [kv_cache_utils.py:864] GPU KV cache size: "
    "42,656 tokens\n"
    "(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [kv_cache_utils.py:868] Maximum "
    "concurrency for 32,768 tokens per request: 1.30x"
)
QWEN3_14B = (
    '{"num_hidden_layers": 40, "num_attention_heads": 40, "num_key_value_heads": 8, '
    '"head_dim": 128, "torch_dtype": "bfloat16"}'
)


def paste_and_submit(page: Any, log: str, config: str) -> None:
    page.fill("#f-log", log)
    page.click("details.paste summary")
    page.fill("#f-model_config", config)
    page.click("#reconcile-form button.primary")
    page.wait_for_selector("#checks")


def test_paste_a_fixture_log(session: Session) -> None:
    # Fixture vllm-v1-qwen3-14b-lmcache1739: 2,666 blocks -> 42,656 tokens (equal), 1.30x.
    session.goto("/reconcile")
    page = session.page
    paste_and_submit(page, QWEN3_14B_LOG, QWEN3_14B)
    hero = page.locator("#answer-hero").inner_text()
    assert "2 equal" in hero and "0 different" in hero
    table = page.locator("#checks").inner_text()
    assert "42,656" in table and "2,664–2,668" in table and "1.30x" in table
    # The paste stays in the box for the next try.
    assert page.locator("#f-log").input_value().startswith("(EngineCore_DP0")


def test_chinese_and_the_toggle_keeps_the_paste(session: Session) -> None:
    session.goto("/reconcile")
    page = session.page
    paste_and_submit(page, GRANITE_LOG, GRANITE)
    page.click("button.lang-switch[value=zh]")
    page.wait_for_selector("html[lang=zh-Hans]")
    assert "在舍入范围内一致" in page.locator("#checks").inner_text()
    assert "463,136" in page.locator("#checks").inner_text()
    page.click("button.lang-switch[value=en]")
    page.wait_for_selector("html[lang=en]")


def test_wrong_engine_without_javascript(browser: Any, live_server: str) -> None:
    with browser_session(browser, live_server, java_script_enabled=False) as s:
        s.goto("/reconcile")
        page = s.page
        page.fill("#f-log", QWEN3_14B_LOG)
        page.click("details.more summary")
        page.select_option("#f-engine", "sglang")
        page.click("#reconcile-form button.primary")
        page.wait_for_selector("#error-summary:not([hidden])")
        assert "vLLM log" in page.locator("#e-engine").inner_text()


def test_pasted_markup_stays_text(session: Session) -> None:
    session.goto("/reconcile")
    page = session.page
    log = "<img src=x onerror=alert('log')>\n" + QWEN3_14B_LOG
    paste_and_submit(page, log, QWEN3_14B)
    assert page.locator("img").count() == 0
    assert page.locator("#f-log").input_value().startswith("<img src=x")
    # session.check_clean() asserts no alert() dialog ever opened.
