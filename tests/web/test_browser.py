"""End-to-end in Debian's chromium (Playwright, no browser download): the page as a user sees
it, with and without JavaScript, and not one console error or CSP violation along the way."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.web.conftest import PHONE, QUESTION_URL, XSS_CONFIG_TEXT, Session, browser_session

pytestmark = pytest.mark.browser


def wait_for_number(session: Session, number: str) -> None:
    session.page.wait_for_function(
        "n => (document.querySelector('#answer-hero .sentence strong') || {}).textContent === n",
        arg=number,
    )


def test_fill_the_form_and_see_47(session: Session) -> None:
    session.goto("/")
    page = session.page
    page.fill("#f-model", "meta-llama/Llama-3.1-8B")
    page.select_option("#f-kv_cache_dtype", "bf16")
    page.fill("#f-context_tokens", "8192")
    page.fill("#f-kv_budget_gib", "48")
    page.click("button.primary")
    page.wait_for_url(re.compile(r"kv_budget_gib=48"))
    wait_for_number(session, "47")
    answer = session.answer()
    assert "47 requests of 8,192 tokens fit in 48 GiB" in answer
    assert "48.00x, as it also counts the reserved block" in answer
    assert page.locator("svg.chart").count() >= 2


def test_switch_to_fp8_doubles_the_number(session: Session) -> None:
    session.goto(QUESTION_URL)
    wait_for_number(session, "47")
    page = session.page
    # With JavaScript the answer follows the field; the URL follows the answer.
    page.select_option("#f-kv_cache_dtype", "fp8")
    wait_for_number(session, "95")
    assert "96.00x" in session.answer()
    page.wait_for_url(re.compile(r"kv_cache_dtype=fp8"))
    # Submitting lands on the same answer at its shareable URL.
    page.click("button.primary")
    page.wait_for_load_state()
    wait_for_number(session, "95")


def test_paste_a_config(session: Session) -> None:
    session.goto("/")
    page = session.page
    page.click("details.paste summary")
    config = XSS_CONFIG_TEXT.replace("<", "").replace(">", "")
    page.fill("#f-model_config", config)
    page.fill("#f-context_tokens", "8192")
    page.fill("#f-kv_budget_gib", "48")
    page.click("button.primary")
    wait_for_number(session, "47")
    assert "pasted config" in page.locator("#answer-hero").inner_text()


def test_pasted_markup_stays_text(session: Session) -> None:
    session.goto("/")
    page = session.page
    page.click("details.paste summary")
    page.fill("#f-model_config", XSS_CONFIG_TEXT)
    page.fill("#f-kv_budget_gib", "48")
    page.fill("#f-context_tokens", "8192")
    page.click("button.primary")
    wait_for_number(session, "47")
    hero = page.locator("#answer-hero").inner_text()
    assert "<img src=x onerror=alert('type')>" in hero  # shown as text
    assert page.locator("img").count() == 0
    assert page.evaluate("document.querySelectorAll('script:not([src])').length") == 0
    assert page.locator("#f-model_config").input_value().startswith("{")
    # session.check_clean() asserts no alert() dialog ever opened.


def test_toggle_language_and_it_sticks(session: Session) -> None:
    session.goto(QUESTION_URL)
    page = session.page
    page.click("button.lang-switch[value=zh]")
    page.wait_for_selector("html[lang=zh-Hans]")
    wait_for_number(session, "47")
    assert "可容纳" in session.answer() and "48.00x" in session.answer()
    session.goto("/")
    assert page.locator("html").get_attribute("lang") == "zh-Hans"
    assert page.locator("label[for=f-model]").inner_text() == "目录中的模型"
    page.click("button.lang-switch[value=en]")
    page.wait_for_selector("html[lang=en]")
    assert page.locator("label[for=f-model]").inner_text() == "Catalog model"


def test_chinese_browser_gets_chinese(browser: Any, live_server: str) -> None:
    with browser_session(browser, live_server, locale="zh-CN") as s:
        s.goto(QUESTION_URL)
        assert s.page.locator("html").get_attribute("lang") == "zh-Hans"
        assert "可容纳" in s.answer()


def test_open_a_shared_url_without_javascript(browser: Any, live_server: str) -> None:
    with browser_session(browser, live_server, java_script_enabled=False) as s:
        s.goto(QUESTION_URL)
        href = s.page.locator("#share-link").get_attribute("href")
        assert href == QUESTION_URL
        other = s.new_page()
        other.goto(live_server + href)
        assert (
            "47 requests of 8,192 tokens fit in 48 GiB"
            in other.locator("#answer-hero .sentence").inner_text()
        )
        # The form works without JavaScript too: POST, then 303 to the shareable GET.
        other.select_option("#f-kv_cache_dtype", "fp8")
        other.click("button.primary")
        other.wait_for_url(re.compile(r"kv_cache_dtype=fp8"))
        assert "95 requests" in other.locator("#answer-hero .sentence").inner_text()


def test_invalid_value_shows_next_to_its_field(session: Session) -> None:
    session.goto(QUESTION_URL)
    page = session.page
    page.fill("#f-context_tokens", "eight thousand")
    page.click("button.primary")
    page.wait_for_load_state()
    error = page.locator('[data-field="context_tokens"] #e-context_tokens')
    error.wait_for(state="visible")
    assert "Enter a whole number" in error.inner_text()
    assert page.locator("#f-context_tokens").get_attribute("aria-invalid") == "true"
    assert page.locator("#f-context_tokens").input_value() == "eight thousand"
    assert page.locator("#error-summary a[href='#f-context_tokens']").count() == 1


def test_live_update_reports_an_error_without_submitting(session: Session) -> None:
    session.goto(QUESTION_URL)
    page = session.page
    page.fill("#f-tensor_parallel_size", "0")
    error = page.locator("#e-tensor_parallel_size")
    error.wait_for(state="visible")
    assert "from 1" in error.inner_text()
    page.fill("#f-tensor_parallel_size", "2")
    error.wait_for(state="hidden")
    assert page.locator("#f-tensor_parallel_size").get_attribute("aria-invalid") is None


def test_keyboard_only(session: Session) -> None:
    session.goto("/")
    page = session.page
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip"
    page.focus("#f-model")
    page.keyboard.type("meta-llama/Llama-3.1-8B")
    visited = []
    # The paste toggle, engine, dtype, release, context length: in reading order.
    for _ in range(5):
        page.keyboard.press("Tab")
        visited.append(page.evaluate("document.activeElement.id || document.activeElement.tagName"))
    assert visited == [
        "SUMMARY",
        "f-engine",
        "f-kv_cache_dtype",
        "f-engine_version",
        "f-context_tokens",
    ]
    page.keyboard.type("8192")
    page.focus("#f-kv_budget_gib")
    page.keyboard.type("48")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"kv_budget_gib=48"))
    wait_for_number(session, "47")


def test_phone_width_has_no_sideways_scroll(browser: Any, live_server: str) -> None:
    with browser_session(browser, live_server, **PHONE) as s:
        s.goto(QUESTION_URL + "&gpu=H100-SXM-80GB")
        wait_for_number(s, "47")
        width = s.page.evaluate("document.documentElement.scrollWidth")
        assert width <= 360
