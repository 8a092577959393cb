"""The page as people meet it, in Debian's chromium (issue 16): Enter plans in the language the
page is in, units are read as typed, one bad keystroke keeps the last answer (marked stale),
and axe-core finds nothing serious, colour contrast included."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.web.conftest import PHONE, QUESTION_URL, Session, browser_session

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
# `make test` installs axe-core here from the npm registry (Makefile: $(AXE)).
AXE_JS = Path(os.environ.get("KVPLAN_AXE_JS", ROOT / "build/axe/node_modules/axe-core/axe.min.js"))

TEXT_FIELDS = (
    "model",
    "context_tokens",
    "requests",
    "kv_budget_gib",
    "gpu_memory_utilization",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "block_size",
    "max_num_batched_tokens",
    "max_num_seqs",
    "weights_gib",
    "bandwidth_tbps",
    "calibration_id",
)


def sentence(session: Session) -> str:
    return str(session.page.locator("#answer-hero .sentence").inner_text())


def wait_for_number(session: Session, number: str) -> None:
    session.page.wait_for_function(
        "n => (document.querySelector('#answer-hero .sentence strong') || {}).textContent === n",
        arg=number,
    )


def to_chinese(session: Session) -> None:
    """The toggle's cookie, so a wrong default button would flip the page back to English."""
    session.goto(QUESTION_URL)
    session.page.click("button.lang-switch[value=zh]")
    session.page.wait_for_selector("html[lang=zh-Hans]")
    wait_for_number(session, "47")


@pytest.mark.parametrize("name", TEXT_FIELDS)
def test_enter_in_each_field_plans_in_the_same_language(session: Session, name: str) -> None:
    to_chinese(session)
    page = session.page
    if name in (
        "block_size",
        "max_num_batched_tokens",
        "max_num_seqs",
        "weights_gib",
        "bandwidth_tbps",
        "calibration_id",
    ):
        page.click("details.more summary")
    page.focus(f"#f-{name}")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_load_state()
    assert page.locator("html").get_attribute("lang") == "zh-Hans"
    wait_for_number(session, "47")
    assert "可容纳" in sentence(session)


def test_enter_on_the_reconcile_page_reconciles(session: Session) -> None:
    session.goto("/reconcile")
    page = session.page
    page.click("button.lang-switch[value=zh]")
    page.wait_for_selector("html[lang=zh-Hans]")
    page.click("details.more summary")
    page.fill("#f-tensor_parallel_size", "1")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.locator("html").get_attribute("lang") == "zh-Hans"
    # Submitted, not toggled: an empty log is reported next to its field.
    page.locator("#e-log").wait_for(state="visible")


@pytest.mark.parametrize("text", ["48GiB", "48 GiB", "48G"])
def test_budget_with_a_unit_gives_47(session: Session, text: str) -> None:
    session.goto(QUESTION_URL.replace("kv_budget_gib=48", "kv_budget_gib=40"))
    wait_for_number(session, "39")  # (40 GiB / 2 MiB − 1) // 512 = 39
    session.page.fill("#f-kv_budget_gib", text)
    wait_for_number(session, "47")
    assert session.page.locator("#f-kv_budget_gib").get_attribute("aria-invalid") is None


def test_decimal_comma_is_refused_not_read_as_15(session: Session) -> None:
    session.goto(QUESTION_URL)
    wait_for_number(session, "47")
    session.page.fill("#f-kv_budget_gib", "1,5")
    error = session.page.locator("#e-kv_budget_gib")
    error.wait_for(state="visible")
    assert "1.5" in error.inner_text()


def test_invalid_context_keeps_the_last_answer_and_marks_the_field(session: Session) -> None:
    session.goto(QUESTION_URL)
    wait_for_number(session, "47")
    page = session.page
    page.fill("#f-context_tokens", "8x")
    page.locator("#e-context_tokens").wait_for(state="visible")
    assert page.locator("#f-context_tokens").get_attribute("aria-invalid") == "true"
    # The arithmetic stays, marked stale; the URL still gives the answer shown.
    assert "47 requests of 8,192 tokens fit in 48 GiB" in sentence(session)
    assert page.locator("#stale-note").is_visible()
    assert "is-stale" in (page.locator("#answer-hero").get_attribute("class") or "")
    assert page.locator("#answer .card").count() >= 4
    assert "context_tokens=8192" in page.url
    # Every mistake at once: the planner's TP error shows while the context is still wrong.
    page.fill("#f-tensor_parallel_size", "3")
    page.locator("#e-tensor_parallel_size").wait_for(state="visible")
    assert page.locator("#e-context_tokens").is_visible()
    # Fixing both brings a new answer and drops the stale mark: 8k = 8192 tokens.
    page.fill("#f-tensor_parallel_size", "1")
    page.fill("#f-context_tokens", "4k")
    wait_for_number(session, "95")  # (24,576 − 1) // 256
    assert not page.locator("#stale-note").is_visible()
    assert "is-stale" not in (page.locator("#answer-hero").get_attribute("class") or "")


def test_chinese_answer_has_no_english_inside(browser: Any, live_server: str) -> None:
    with browser_session(browser, live_server, locale="zh-CN") as s:
        s.goto(QUESTION_URL)
        wait_for_number(s, "47")
        # An engine's own words (a log line it prints) are quoted as printed, marked as such.
        english = s.page.locator(
            "#answer [lang=en]:not(.engine-words), #answer-hero [lang=en]:not(.engine-words)"
        )
        assert english.count() == 0, english.all_inner_texts()
        # The notes are there, in Chinese, numbers included.
        notes = s.page.locator("#answer .notes li")
        assert notes.count() >= 3
        assert (
            "47 个"
            in s.page.locator("#answer .notes li[data-code='capacity.null_block']").inner_text()
        )


AXE_PAGES = (
    "/",
    QUESTION_URL,
    QUESTION_URL + "&gpu=H100-SXM-80GB",
    "/?model=meta-llama/Llama-3.1-8B&gpu=H200-141GB&context_tokens=512",
    QUESTION_URL.replace("kv_budget_gib=48", "gpu=H100-SXM-80GB") + "&launch=1",
    "/?model=meta-llama/Llama-3.1-8B&context_tokens=lots&tensor_parallel_size=3",
    # Issue 25: an over-full GPU (overflow mark), SGLang's flags open, a stale answer kept
    # after Enter with a mistake, and the MoE decode chart with its batches.
    "/?model=meta-llama/Llama-3.1-70B&gpu=H200-141GB&context_tokens=8192",
    "/?model=meta-llama/Llama-3.1-8B&engine=sglang&gpu=H100-SXM-80GB&context_tokens=8192",
    "/?model=meta-llama/Llama-3.1-8B&context_tokens=32kk&kv_budget_gib=48"
    "&last=model%3Dmeta-llama/Llama-3.1-8B%26context_tokens%3D8192%26kv_budget_gib%3D48",
    "/?model=Qwen/Qwen3-30B-A3B&gpu=H200-141GB&context_tokens=32k",
    "/reconcile",
    "/explain",
)


def axe_violations(page: Any) -> list[dict[str, Any]]:
    page.evaluate(AXE_JS.read_text(encoding="utf-8") + "\n;0")
    result = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
    )
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5]}
        for v in result
        if v["impact"] in ("serious", "critical") or v["id"] == "color-contrast"
    ]


@pytest.fixture(scope="module")
def axe_available() -> None:
    if not AXE_JS.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"axe-core missing at {AXE_JS}: `make test` installs it")
        pytest.skip(f"axe-core not installed at {AXE_JS} (`make test` installs it)")


@pytest.mark.parametrize("lang", ["en-US", "zh-CN"])
@pytest.mark.parametrize("path", AXE_PAGES)
def test_axe_finds_nothing_serious(
    browser: Any, live_server: str, axe_available: None, path: str, lang: str
) -> None:
    with browser_session(browser, live_server, locale=lang) as s:
        s.goto(path)
        s.page.wait_for_load_state("networkidle")
        assert axe_violations(s.page) == []


def test_axe_on_a_phone_and_with_a_stale_answer(
    browser: Any, live_server: str, axe_available: None
) -> None:
    with browser_session(browser, live_server, **PHONE) as s:
        s.goto(QUESTION_URL + "&gpu=H100-SXM-80GB")
        wait_for_number(s, "47")
        assert axe_violations(s.page) == []
        s.page.fill("#f-context_tokens", "8x")
        s.page.locator("#stale-note").wait_for(state="visible")
        assert axe_violations(s.page) == []


# axe-core leaves SVG text "incomplete" (it cannot see the background through an image node):
# the charts' labels are checked here, against the white card they sit on.
SVG_CONTRAST = """() => {
  const lum = (rgb) => {
    const [r, g, b] = rgb.map((c) => {
      c /= 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const bad = [];
  for (const t of document.querySelectorAll("svg.chart text")) {
    const s = getComputedStyle(t);
    const rgb = s.fill.match(/\\d+(\\.\\d+)?/g).slice(0, 3).map(Number);
    let alpha = 1;
    for (let e = t; e && e.nodeType === 1; e = e.parentElement) {
      alpha *= Number(getComputedStyle(e).opacity);
    }
    const shown = rgb.map((c) => c * alpha + 255 * (1 - alpha));
    const ratio = (1 + 0.05) / (lum(shown) + 0.05);
    if (ratio < 4.5) bad.push([t.textContent, s.fill, alpha, ratio.toFixed(2)]);
  }
  return [document.querySelectorAll("svg.chart text").length, bad];
}"""


def test_chart_labels_meet_contrast(session: Session) -> None:
    session.goto(QUESTION_URL + "&gpu=H100-SXM-80GB")
    wait_for_number(session, "47")
    count, bad = session.page.evaluate(SVG_CONTRAST)
    assert count > 20 and bad == []


def test_the_axe_harness_catches_low_contrast(session: Session, axe_available: None) -> None:
    # A check that cannot fail is no check: grey #bbb on white (1.9:1) must be reported.
    session.goto("/")
    session.page.evaluate(
        "() => { const p = document.createElement('p'); p.textContent = 'faint text';"
        " p.style.color = '#bbbbbb'; document.querySelector('main').appendChild(p); }"
    )
    assert "color-contrast" in [v["id"] for v in axe_violations(session.page)]


def test_dtype_options_follow_the_engine_live(session: Session) -> None:
    session.goto(QUESTION_URL)
    wait_for_number(session, "47")
    page = session.page
    assert page.locator("#f-kv_cache_dtype option[value=int4]").count() == 0
    page.select_option("#f-engine", "trtllm")
    page.wait_for_function("() => !!document.querySelector('#f-kv_cache_dtype option[value=int4]')")
    assert page.locator("#f-kv_cache_dtype").input_value() == "bf16"


def test_on_a_phone_the_headline_follows_the_field_being_typed_in(
    browser: Any, live_server: str
) -> None:
    with browser_session(browser, live_server, **PHONE) as s:
        s.goto(QUESTION_URL)
        wait_for_number(s, "47")
        page = s.page
        page.locator("#f-kv_budget_gib").scroll_into_view_if_needed()
        page.fill("#f-kv_budget_gib", "40")
        wait_for_number(s, "39")
        peek = page.locator("#live-peek")
        peek.wait_for(state="visible")
        assert peek.inner_text().startswith("39 requests of 8,192 tokens fit in 40 GiB")
        # Wide screens show the answer beside the form: no mirror there.
        page.set_viewport_size({"width": 1280, "height": 900})
        assert not peek.is_visible()
