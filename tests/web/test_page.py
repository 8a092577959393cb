"""The HTML page over TestClient: answers from query parameters, errors next to fields, the
pasted-config path, the XSS probe, CSP-clean markup on every response."""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from starlette.testclient import TestClient

from planner.api.security import CONTENT_SECURITY_POLICY
from tests.web.conftest import QUESTION, QUESTION_URL, XSS_CONFIG_TEXT, parse


def sentence(text: str) -> str:
    match = re.search(r'<p class="sentence[^"]*">(.*?)</p>', text, re.S)
    assert match, "no answer sentence"
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", match.group(1)))).strip()


def error_text(text: str, field: str) -> str:
    match = re.search(rf'<p class="error" id="e-{field}"[^>]*>(.*?)</p>', text, re.S)
    assert match, f"no error slot for {field}"
    return html.unescape(re.sub(r"<[^>]+>", " ", match.group(1))).strip()


def test_query_parameters_render_the_answer(client: TestClient) -> None:
    # 48 GiB / (2·32·8·128·2 B · 16 tokens) = 24,576 blocks; block 0 is vLLM's null block, so
    # (24,576 − 1) // 512 = 47 requests of 8,192 tokens, while the log prints 48.00x
    # (engine_rules.md: vLLM's "Maximum concurrency" ignores the null block).
    response = client.get(QUESTION_URL)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    said = sentence(response.text)
    assert said.startswith("47 requests of 8,192 tokens fit in 48 GiB")
    assert "vLLM's log will say 48.00x because one block is reserved" in said
    # The arithmetic, the way the seeds write it.
    assert "2 × L × Hkv × d × b" in response.text
    assert "2 × 32 × 8 × 128 × 2 B = 131,072 B" in response.text
    assert "128 KiB" in response.text


def test_fp8_doubles_the_answer(client: TestClient) -> None:
    # fp8 halves bytes per token: 49,152 blocks, (49,152 − 1) // 512 = 95; the log says 96.00x.
    response = client.get(QUESTION_URL.replace("kv_cache_dtype=bf16", "kv_cache_dtype=fp8"))
    said = sentence(response.text)
    assert said.startswith("95 requests of 8,192 tokens fit in 48 GiB")
    assert "96.00x" in said


def test_gpu_preset_shows_budget_and_decode_floor(client: TestClient) -> None:
    response = client.get(
        "/?model=meta-llama/Llama-3.1-8B&kv_cache_dtype=bf16&context_tokens=8192"
        "&gpu=H100-SXM-80GB&gpu_memory_utilization=0.9&tensor_parallel_size=2"
    )
    assert response.status_code == 200
    text = response.text
    assert "of KV cache per GPU" in sentence(text)
    assert "TB/s" in text and "GiB" in text
    assert "Decode step, at least" in text
    assert 'id="h-decode"' in text
    # All three charts, as inline SVG.
    assert text.count('<svg class="chart') == 3


def test_empty_form_is_the_start_page(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 200
    markup = parse(response.text)
    assert markup.by_id("plan-form") is not None
    assert 'class="sentence lead"' in response.text


def test_empty_query_fields_redirect_to_the_tidy_url(client: TestClient) -> None:
    response = client.get(QUESTION_URL + "&gpu=&requests=&block_size=", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == QUESTION_URL


def test_post_without_config_redirects_to_a_shareable_get(client: TestClient) -> None:
    form = {**QUESTION, "engine": "vllm", "gpu": "", "model_config": "  "}
    response = client.post("/", data=form, follow_redirects=False)
    assert response.status_code == 303
    query = parse_qs(urlsplit(response.headers["location"]).query)
    assert query == {
        "model": ["meta-llama/Llama-3.1-8B"],
        "kv_cache_dtype": ["bf16"],
        "context_tokens": ["8192"],
        "kv_budget_gib": ["48"],
    }
    assert "47 requests" in sentence(client.get(response.headers["location"]).text)


def test_share_link_reproduces_the_question(client: TestClient) -> None:
    markup = parse(client.get(QUESTION_URL).text)
    link = markup.by_id("share-link")
    assert link is not None and link["href"] == QUESTION_URL


@pytest.mark.parametrize(
    ("query", "field", "expected"),
    [
        ("context_tokens=abc", "context_tokens", "Enter a whole number"),
        ("context_tokens=0", "context_tokens", "Enter a number from 1"),
        ("kv_budget_gib=-3", "kv_budget_gib", "Enter GiB from 0"),
        ("gpu_memory_utilization=92", "gpu_memory_utilization", "at most 1"),
        ("tensor_parallel_size=x", "tensor_parallel_size", "whole number"),
        ("requests=8192x10,oops", "requests", "Cannot read 'oops'"),
        ("engine=ollama", "engine", "Choose one of: vllm, sglang, trtllm, transformers"),
    ],
)
def test_invalid_value_shows_next_to_its_field(
    client: TestClient, query: str, field: str, expected: str
) -> None:
    url = "/?model=meta-llama/Llama-3.1-8B&kv_budget_gib=48&" + query
    response = client.get(url)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert expected in error_text(response.text, field)
    control = parse(response.text).by_id(f"f-{field}")
    assert control is not None and control.get("aria-invalid") == "true"
    assert f"e-{field}" in (control.get("aria-describedby") or "")
    # What the user typed comes back for correction.
    assert 'id="error-summary"' in response.text and f'href="#f-{field}"' in response.text


def test_core_errors_land_on_the_field_they_name(client: TestClient) -> None:
    unknown = client.get("/?model=no-such/model&kv_budget_gib=48")
    assert unknown.status_code == 200
    assert "Not found." in error_text(unknown.text, "model")
    assert "unknown model" in error_text(unknown.text, "model")
    dtype = client.get("/?model=meta-llama/Llama-3.1-8B&kv_cache_dtype=fp7&kv_budget_gib=48")
    assert dtype.status_code == 200
    assert "unknown dtype 'fp7'" in error_text(dtype.text, "kv_cache_dtype")


def test_missing_model_is_reported(client: TestClient) -> None:
    response = client.get("/?context_tokens=8192")
    assert response.status_code == 200
    assert "Choose a model" in error_text(response.text, "model")


def test_pasted_config_is_planned(client: TestClient) -> None:
    config = XSS_CONFIG_TEXT.replace("<", "").replace(">", "")
    response = client.post(
        "/",
        data={
            "model_config": config,
            "kv_cache_dtype": "bf16",
            "context_tokens": "8192",
            "kv_budget_gib": "48",
        },
    )
    assert response.status_code == 200
    assert sentence(response.text).startswith("47 requests of 8,192 tokens fit in 48 GiB")
    assert "no-store" in response.headers["cache-control"]
    assert "has no link" in response.text


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("{not json", "Not valid JSON (line 1, column 2)"),
        ("[1, 2]", "Paste a JSON object"),
        ('{"model_type": "llama"}', "This config.json cannot be used."),
    ],
)
def test_bad_config_shows_next_to_the_textarea(
    client: TestClient, config: str, expected: str
) -> None:
    response = client.post("/", data={"model_config": config, "kv_budget_gib": "48"})
    assert response.status_code == 200
    assert expected in error_text(response.text, "model_config")
    # The pasted text comes back in the textarea, escaped.
    assert '<details class="paste" open>' in response.text


def test_xss_probe_renders_inert(client: TestClient) -> None:
    response = client.post(
        "/", data={"model_config": XSS_CONFIG_TEXT, "context_tokens": "8192", "kv_budget_gib": "48"}
    )
    assert response.status_code == 200
    text = response.text
    assert "<script>alert" not in text
    assert "<img src=x" not in text
    assert "&lt;img src=x onerror=alert(" in text  # shown as text (model type, textarea)
    markup = parse(text)
    assert not [t for t, _ in markup.tags if t == "img"]
    assert all(a.get("src") for t, a in markup.tags if t == "script")
    assert not [a for _, a in markup.tags if any(k.startswith("on") for k in a)]


def test_xss_probe_in_query_parameters_is_inert(client: TestClient) -> None:
    response = client.get(
        '/?model=<script>alert(1)</script>&kv_cache_dtype="><img src=x onerror=1>'
    )
    assert response.status_code == 200
    assert "<script>alert" not in response.text and "<img src=x" not in response.text
    assert not [t for t, _ in parse(response.text).tags if t == "img"]


HTML_RESPONSES = [
    ("GET", "/", None),
    ("GET", QUESTION_URL, None),
    ("GET", QUESTION_URL + "&gpu=H100-SXM-80GB", None),
    ("GET", "/?model=meta-llama/Llama-3.1-8B&context_tokens=abc", None),
    ("POST", "/", {"model_config": XSS_CONFIG_TEXT, "kv_budget_gib": "48"}),
    ("POST", "/", {"model_config": "{", "kv_budget_gib": "48"}),
]


@pytest.mark.parametrize(("method", "url", "data"), HTML_RESPONSES)
def test_every_page_has_the_csp_and_no_inline_code(
    client: TestClient, method: str, url: str, data: dict[str, str] | None
) -> None:
    response = client.request(method, url, data=data)
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "default-src 'self'" in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"
    markup = parse(response.text)
    assert not [t for t, _ in markup.tags if t == "style"], "no <style> blocks"
    assert not [a for _, a in markup.tags if "style" in a], "no style attributes"
    scripts = [a for t, a in markup.tags if t == "script"]
    assert scripts and all((a.get("src") or "").startswith("/static/") for a in scripts)
    assert not [a for _, a in markup.tags if any(k.startswith("on") for k in a)]
    # Every stylesheet and icon is same-origin.
    for tag, attrs in markup.tags:
        if tag == "link":
            assert (attrs.get("href") or "").startswith("/static/")


def test_every_input_has_a_label(client: TestClient) -> None:
    markup = parse(client.get(QUESTION_URL).text)
    controls = [a for t, a in markup.tags if t in {"input", "select", "textarea"}]
    labelled = {a.get("for") for t, a in markup.tags if t == "label"}
    assert controls
    for attrs in controls:
        assert attrs.get("id") in labelled, attrs


def test_static_files_are_served(client: TestClient) -> None:
    for path in ("/static/page.css", "/static/page.js", "/static/favicon.svg"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY


def test_static_css_and_js_need_no_unsafe_inline() -> None:
    from planner.app import static_dir

    static = static_dir()
    script = (static / "page.js").read_text("utf-8")
    assert "eval(" not in script and "innerHTML" not in script
    assert "new Function" not in script


def test_defaults_alone_are_not_a_question(client: TestClient) -> None:
    # What a bare form submits (the selects' defaults): the start page, no error.
    response = client.get("/?engine=vllm&kv_cache_dtype=auto")
    assert response.status_code == 200
    assert 'id="error-summary" class="error-summary" role="alert" hidden' in response.text
    redirect = client.post(
        "/lang",
        data={"lang": "en", "engine": "vllm", "kv_cache_dtype": "auto", "model": ""},
        follow_redirects=False,
    )
    assert redirect.headers["location"] == "/"


def test_calibrated_estimate_names_the_gpu_and_the_time(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import dataclass
    from datetime import UTC, datetime

    from planner.web import page

    @dataclass(frozen=True)
    class Calibration:
        id: str = "cal-1"
        device_name: str = "NVIDIA H100 80GB HBM3"
        measured_at: datetime = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
        decode_bandwidth_bytes_per_s: float = 2.9e12
        copy_bandwidth_bytes_per_s: float = 3.0e12
        fixed_overhead_seconds: float = 5e-6

    async def fake_lookup(request: object, http_request: object) -> Calibration:
        return Calibration()

    monkeypatch.setattr(page, "calibration_for", fake_lookup)
    response = client.get(QUESTION_URL + "&gpu=H100-SXM-80GB&calibration_id=cal-1")
    text = html.unescape(response.text)
    assert "Calibrated estimate" in text
    assert "Measured on NVIDIA H100 80GB HBM3 at 2026-05-01T12:00:00Z" in text
    assert "2.90 TB/s" in text  # the measured decode bandwidth, labelled


def test_unknown_calibration_is_an_error_on_its_field(client: TestClient) -> None:
    response = client.get(QUESTION_URL + "&calibration_id=nope")
    assert response.status_code == 200
    assert "Not found." in error_text(response.text, "calibration_id")
    assert '<details class="more" open>' in response.text


def test_tiny_bandwidth_is_a_form_error_not_a_500(client: TestClient) -> None:
    response = client.get(
        "/?model=meta-llama/Llama-3.1-8B&kv_budget_gib=48&bandwidth_tbps=1e-30"
    )
    assert response.status_code == 200
    assert "1000000" in response.text  # the minimum, next to the bandwidth field
