"""The /explain page in Debian's chromium, at phone width (the page's own tests, without a
browser, are in test_explain.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.web.conftest import PHONE, browser_session


@pytest.fixture
def phone(browser: Any, live_server: str) -> Iterator[Any]:
    with browser_session(browser, live_server, **PHONE) as s:
        yield s


@pytest.mark.browser
def test_in_the_browser_at_phone_width(phone: Any) -> None:
    """Pick P and T with the plain form, read the grid, switch to Chinese: no console error,
    no CSP violation, no sideways scroll at 360 px."""
    phone.goto("/explain")
    page = phone.page
    assert page.locator("#softmax-output").inner_text() == "34/6"
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    page.fill("#f-cached_tokens", "4")
    page.fill("#f-chunk_tokens", "3")
    page.click("#mask button.primary")
    page.wait_for_url(re.compile(r"cached_tokens=4&chunk_tokens=3.*#mask$"))
    verdict = page.locator("#mask-verdict").inner_text()
    assert "Q4 sees only K0 instead of K0–K4" in verdict
    assert page.locator("#mask-wrong tbody tr").count() == 3
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    page.click("button.lang-switch[value=zh]")
    page.wait_for_selector("html[lang=zh-Hans]")
    assert "mask 是 3 × 7" in page.locator("#mask").inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
