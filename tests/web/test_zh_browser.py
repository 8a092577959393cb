"""The Chinese page in Debian's chromium: every state the zh scan renders, as the browser shows
it after its scripts ran (live updates included), has no English sentence; an error typed into
a field reads in Chinese without submitting; a pasted log reconciles in Chinese."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.conftest import browser_session
from tests.web.test_reconcile_page import GRANITE, GRANITE_LOG
from tests.web.test_zh_states import STATES, english_sentences

pytestmark = pytest.mark.browser
ZH_BROWSER = {"locale": "zh-CN"}


def _rendered(page: Any) -> str:
    """The DOM as the browser holds it now (after scripts and live updates)."""
    return str(page.content())


def test_every_state_reads_in_chinese(browser: Any, live_server: str) -> None:
    with browser_session(browser, live_server, **ZH_BROWSER) as s:
        found: dict[str, list[str]] = {}
        for name, url in sorted(STATES.items()):
            s.goto(url)
            s.page.wait_for_load_state("networkidle")
            assert s.page.locator("html").get_attribute("lang") == "zh-Hans"
            english = english_sentences(_rendered(s.page))
            if english:
                found[name] = english
        assert found == {}


def test_a_core_error_typed_live_reads_in_chinese(browser: Any, live_server: str) -> None:
    # Llama-3.1-8B has 32 attention heads: tensor_parallel_size 3 does not divide them, and
    # the live update says so next to the field, in Chinese, with the sizes that work.
    with browser_session(browser, live_server, **ZH_BROWSER) as s:
        s.goto(STATES["answer, GPU"])
        page = s.page
        page.fill("#f-tensor_parallel_size", "3")
        error = page.locator("#e-tensor_parallel_size")
        error.wait_for(state="visible")
        page.wait_for_function(
            "() => document.querySelector('#e-tensor_parallel_size').textContent.includes('整除')"
        )
        said = error.inner_text()
        assert "vLLM 要求 num_attention_heads（32）能被 tensor_parallel_size（3）整除" in said
        assert "[1, 2, 4, 8, 16, 32]" in said
        assert english_sentences(_rendered(page)) == []


def test_a_pasted_log_reconciles_in_chinese(browser: Any, live_server: str) -> None:
    with browser_session(browser, live_server, **ZH_BROWSER) as s:
        s.goto("/reconcile")
        page = s.page
        page.fill("#f-log", GRANITE_LOG)
        page.click("details.paste summary")
        page.fill("#f-model_config", GRANITE)
        page.click("#reconcile-form button.primary")
        page.wait_for_selector("#checks")
        assert "在舍入范围内一致" in page.locator("#checks").inner_text()
        assert "每卡权重 3.4244 GiB（第 1 行）" in page.locator("#reserves").inner_text()
        assert english_sentences(_rendered(page)) == []
