"""The answer a deployer acts on, in Debian's chromium (issue 25): every decode-chart column is
the plan at its length, "will it start" is in the headline, the last good answer survives Enter
and the language switch, every engine input is on the form, and an over-full GPU's bar says so."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.conftest import QUESTION_URL, Session

pytestmark = pytest.mark.browser

QWEN_MOE = "/?model=Qwen/Qwen3-30B-A3B&gpu=H200-141GB&context_tokens=32k"
LLAMA_70B_H200 = "/?model=meta-llama/Llama-3.1-70B&gpu=H200-141GB&context_tokens=8192"


def wait_for_number(session: Session, number: str) -> None:
    session.page.wait_for_function(
        "n => (document.querySelector('#answer-hero .sentence strong') || {}).textContent === n",
        arg=number,
    )


def api_plan(session: Session, body: dict[str, Any]) -> dict[str, Any]:
    response = session.context.request.post(session.base + "/api/v1/plan", data=body)
    assert response.status == 200, response.text()
    plan: dict[str, Any] = response.json()
    return plan


def test_every_decode_column_is_the_plan_at_its_length(session: Session) -> None:
    # Issue 25 item 2: Qwen3-30B-A3B on an H200 at 32k. The 1k column is `kvplan plan
    # --context 1k`'s decode floor: 28.006 ms for a batch of 735 (all 128 experts touched).
    session.goto(QWEN_MOE)
    page = session.page
    page.wait_for_selector("#fig-decode-title")
    columns = page.eval_on_selector_all(
        "svg text.value[data-context-tokens]",
        "els => els.map(e => [e.dataset.contextTokens, e.dataset.batchRequests,"
        " e.dataset.stepSeconds, e.textContent])",
    )
    assert len(columns) >= 5
    body = {"model": "Qwen/Qwen3-30B-A3B", "gpu": "H200-141GB"}
    for ctx, batch, step, shown in columns:
        plan = api_plan(session, {**body, "context_tokens": int(ctx)})
        bounds = plan["bounds"]
        assert int(batch) == bounds["batch_requests"] == plan["capacity"]["max_running_requests"]
        assert float(step) == pytest.approx(bounds["decode_step_seconds"], rel=1e-12)
        assert shown == f"{bounds['decode_step_seconds'] * 1e3:.1f}"
    first = dict((c[0], c) for c in columns)["1024"]
    assert first[1] == "735" and round(float(first[2]) * 1e3, 3) == 28.006
    # The batch is printed under each column, not only in a tooltip.
    ticks = page.eval_on_selector_all("svg text.tick.sub", "els => els.map(e => e.textContent)")
    assert "×735" in ticks and "×22" in ticks
    legend = page.locator("#fig-decode-title ~ .legend").inner_text()
    assert "Your context length" in legend and "×N under a column" in legend


def test_headline_says_whether_it_starts(session: Session) -> None:
    page = session.page
    session.goto(QUESTION_URL.replace("kv_budget_gib=48", "gpu=H100-SXM-80GB"))
    starts = page.locator("#answer-hero #will-it-start")
    assert starts.get_attribute("data-starts") == "yes"
    assert "Will it start? Yes" in starts.inner_text()
    # No, with vLLM's own reason (the 70B's 131.42 GiB of weights exceed 0.92 × 140.40 GiB).
    session.goto(LLAMA_70B_H200)
    assert starts.get_attribute("data-starts") == "no"
    text = starts.inner_text()
    assert "vLLM refuses to start" in text
    assert "No available memory for the cache blocks" in starts.locator("q[lang=en]").inner_text()
    # It comes before the notes, right under the headline's sentence.
    order = page.evaluate(
        "() => [...document.querySelectorAll('#answer-hero .sentence, #will-it-start,"
        " #answer .notes')].map(e => e.id || e.className)"
    )
    assert order[:2] == ["sentence", "will-it-start"]
    # Unknown without a budget or a GPU: nothing to check against.
    session.goto("/?model=meta-llama/Llama-3.1-8B&context_tokens=8192")
    assert starts.get_attribute("data-starts") == "unknown"
    assert "Unknown" in starts.inner_text()


def test_an_over_full_gpu_adds_up_and_shows_the_overflow(session: Session) -> None:
    session.goto(LLAMA_70B_H200)
    page = session.page
    caption = page.locator("#fig-memory-title").inner_text()
    assert caption.endswith("140.40 GiB")  # the GPU as torch sees it, not 150-odd GiB
    assert page.locator("svg rect.overflow-mark").count() == 1
    legend = page.locator("#fig-memory-title ~ .legend").inner_text()
    assert "-6.12 GiB" in legend and "Past the GPU's memory" in legend
    assert "11.23 GiB" in legend  # not given to the engine: 0.08 × 140.40 GiB
    assert "129.17 GiB" in page.locator("#memory-over").inner_text()


@pytest.mark.parametrize(("field", "bad"), [("context_tokens", "32kk"), ("kv_budget_gib", "1,5")])
def test_the_last_answer_survives_enter_and_the_language_switch(
    session: Session, field: str, bad: str
) -> None:
    session.goto(QUESTION_URL)
    wait_for_number(session, "47")
    page = session.page
    page.fill(f"#f-{field}", bad)
    page.locator(f"#e-{field}").wait_for(state="visible")
    # Enter: a full page load (the form posts, the server answers at a URL), same answer.
    with page.expect_navigation():
        page.press(f"#f-{field}", "Enter")
    assert "47 requests of 8,192 tokens fit in 48 GiB" in session.answer()
    assert page.locator(f"#e-{field}").is_visible()
    assert page.locator(f"#f-{field}").input_value() == bad
    assert page.locator("#stale-note").is_visible()
    assert page.locator("#answer").get_attribute("data-answer") == "stale"
    assert page.locator("#answer .card").count() >= 4
    # The language switch: the same answer, in Chinese, the mistake still marked.
    with page.expect_navigation():
        page.click("button.lang-switch[value=zh]")
    page.wait_for_selector("html[lang=zh-Hans]")
    assert page.locator("#answer-hero .sentence strong").inner_text() == "47"
    assert page.locator(f"#e-{field}").is_visible()
    assert page.locator(f"#f-{field}").input_value() == bad
    assert page.locator("#stale-note").is_visible()
    # Fixing the field brings a fresh answer, no longer stale.
    page.fill(f"#f-{field}", "8192" if field == "context_tokens" else "48")
    page.locator("#stale-note").wait_for(state="hidden")
    assert page.locator("#answer").get_attribute("data-answer") == "yes"


def test_the_engine_release_is_honoured_and_an_unknown_parameter_is_an_error(
    session: Session,
) -> None:
    page = session.page
    # 0.10 has no explicit bf16 KV cache (its own CacheConfig): the release is asked with auto.
    session.goto(QUESTION_URL.replace("=bf16", "=auto") + "&engine_version=0.10")
    assert page.locator("#f-engine_version").input_value() == "0.10"
    assert "vLLM 0.10" in page.locator("#answer-hero .facts").inner_text()
    releases = page.eval_on_selector_all("#release-list option", "els => els.map(e => e.value)")
    assert {"0.33", "0.10", "0.9"} <= set(releases)
    # A release the engine's rules do not cover: the error is next to the field.
    page.fill("#f-engine_version", "0.5")
    page.locator("#e-engine_version").wait_for(state="visible")
    assert "0.5" in page.locator("#e-engine_version").inner_text()
    # A parameter the page does not know is said, not dropped.
    session.goto(QUESTION_URL + "&engine_versoin=0.10")
    summary = page.locator("#error-summary")
    assert summary.is_visible() and "engine_versoin" in summary.inner_text()
    assert page.locator("#answer").get_attribute("data-answer") == "no"


def test_sglang_flags_show_with_sglang(session: Session) -> None:
    page = session.page
    session.goto(QUESTION_URL.replace("kv_budget_gib=48", "gpu=H100-SXM-80GB"))
    page.wait_for_selector("#answer[data-answer=yes]")
    assert not page.locator("#sglang-fields").is_visible()
    page.select_option("#f-engine", "sglang")
    page.locator("#sglang-fields").wait_for(state="visible")
    for name in (
        "context_length",
        "chunked_prefill_size",
        "cuda_graph_max_bs",
        "max_total_tokens",
        "swa_full_tokens_ratio",
        "mamba_full_memory_ratio",
        "max_mamba_cache_size",
        "mamba_ssm_dtype",
        "data_parallel_size",
        "enable_dp_attention",
    ):
        assert page.locator(f"#f-{name}").is_visible(), name
    page.wait_for_function(
        "() => document.querySelector('#answer-hero .facts').textContent.includes('SGLang')"
    )
    # --max-total-tokens 40960 holds five requests of 8,192 tokens (SGLang pages of 1 token).
    page.fill("#f-max_total_tokens", "40960")
    page.wait_for_url("**max_total_tokens=40960**")
    plan = api_plan(
        session,
        {
            "model": "meta-llama/Llama-3.1-8B",
            "engine": "sglang",
            "kv_cache_dtype": "bf16",
            "context_tokens": 8192,
            "gpu": "H100-SXM-80GB",
            "max_total_tokens": 40960,
        },
    )
    wait_for_number(session, str(plan["capacity"]["max_requests"]))


def test_sglang_state_pool_flags_replan_the_hybrid(session: Session) -> None:
    # Qwen3.5-27B under SGLang on an H200: its gated delta nets' state pool takes
    # --max-mamba-cache-size and --mamba-ssm-dtype from the form; the answer is the API's.
    page = session.page
    body: dict[str, Any] = {
        "model": "Qwen/Qwen3.5-27B",
        "engine": "sglang",
        "context_tokens": 32768,
        "gpu": "H200-141GB",
    }
    session.goto("/?model=Qwen/Qwen3.5-27B&engine=sglang&context_tokens=32768&gpu=H200-141GB")
    page.wait_for_selector("#answer[data-answer=yes]")
    wait_for_number(session, str(api_plan(session, body)["capacity"]["max_requests"]))
    page.fill("#f-max_mamba_cache_size", "64")
    page.wait_for_url("**max_mamba_cache_size=64**")
    page.select_option("#f-mamba_ssm_dtype", "bfloat16")
    page.wait_for_url("**mamba_ssm_dtype=bfloat16**")
    plan = api_plan(session, {**body, "max_mamba_cache_size": 64, "mamba_ssm_dtype": "bfloat16"})
    assert plan["capacity"]["state_pool_slots"] == 64
    wait_for_number(session, str(plan["capacity"]["max_requests"]))
    page.wait_for_function(
        "() => document.querySelector('#answer').textContent.includes('64 slots of')"
    )
    # A ratio of 0 is refused next to its field; the last answer stays, marked stale.
    page.fill("#f-mamba_full_memory_ratio", "0")
    page.locator("#e-mamba_full_memory_ratio").wait_for(state="visible")
    assert "above 0" in page.locator("#e-mamba_full_memory_ratio").inner_text()
    page.locator("#stale-note").wait_for(state="visible")
    wait_for_number(session, str(plan["capacity"]["max_requests"]))


def test_speculative_decoding_and_a_shared_prefix_are_on_the_form(session: Session) -> None:
    page = session.page
    session.goto("/?model=meta-llama/Llama-3.1-8B&kv_cache_dtype=bf16&gpu=H100-SXM-80GB")
    page.click("details.more summary")
    page.select_option("#f-speculative_method", "draft_model")
    page.locator("#e-speculative_model").wait_for(state="visible")  # draft_model needs one
    page.fill("#f-speculative_model", "meta-llama/Llama-3.2-1B")
    page.fill("#f-speculative_tokens", "3")
    page.wait_for_url("**speculative_tokens=3**")
    # The draft's 16 layers × 8 KV heads × 64 × 2 × 2 B = 32 KiB join the target's 128 KiB.
    page.wait_for_function(
        "() => document.querySelector('#answer-hero .facts').textContent.includes('160 KiB')"
    )
    page.fill("#f-requests", "8192x10, 2048x30")
    page.fill("#f-prefix_tokens", "1k")
    page.wait_for_url("**prefix_tokens=1k**")
    saved = page.locator("#answer dt", has_text="Saved by sharing prefixes")
    saved.wait_for()
    plan = api_plan(
        session,
        {
            "model": "meta-llama/Llama-3.1-8B",
            "kv_cache_dtype": "bf16",
            "gpu": "H100-SXM-80GB",
            "speculative_config": {
                "method": "draft_model",
                "model": "meta-llama/Llama-3.2-1B",
                "num_speculative_tokens": 3,
            },
            "requests": [
                {"context_tokens": 8192, "count": 10},
                {"context_tokens": 2048, "count": 30},
            ],
            "shared_prefix_tokens": 1024,  # one prefix across the mix, as the CLI's --prefix
        },
    )
    shown = page.locator("#answer dt:has-text('Saved by sharing prefixes') + dd").inner_text()
    assert shown == f"{plan['totals']['prefix_shared_bytes_saved'] / (1 << 30):.2f} GiB"
    # A prefix without a mix has no requests to share it: said next to the field.
    page.fill("#f-requests", "")
    page.locator("#e-prefix_tokens").wait_for(state="visible")


def test_a_model_id_not_in_the_catalog_gets_suggestions(session: Session) -> None:
    session.goto("/?model=Qwen3-30B&gpu=H200-141GB")
    error = session.page.locator("#e-model")
    assert error.is_visible() and "Did you mean" in error.inner_text()
    assert "Qwen/Qwen3-30B-A3B" in error.inner_text()
    session.goto("/?model=meta-llama/Llama-3.1-8B&gpu=H200")
    assert "Did you mean: H200-141GB?" in session.page.locator("#e-gpu").inner_text()


def test_tab_order_goes_headline_form_arithmetic(session: Session) -> None:
    # On a GPU the arithmetic has a link of its own (the launch command) to land on.
    session.goto(QUESTION_URL.replace("kv_budget_gib=48", "gpu=H100-SXM-80GB"))
    page = session.page
    page.wait_for_selector("#answer[data-answer=yes]")
    page.focus("#answer-hero .share a:last-of-type")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.closest('#plan-form') !== null")
    for _ in range(200):
        page.keyboard.press("Tab")
        if not page.evaluate("document.activeElement.closest('#plan-form') !== null"):
            break
    where = "document.activeElement.outerHTML.slice(0, 120)"
    assert page.evaluate("document.activeElement.closest('#answer') !== null"), page.evaluate(where)
