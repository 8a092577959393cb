"""The HTML page over TestClient: answers from query parameters, errors next to fields, the
pasted-config path, the XSS probe, CSP-clean markup on every response."""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qs, quote, urlsplit

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
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", match.group(1)))).strip()


def test_query_parameters_render_the_answer(client: TestClient) -> None:
    # 48 GiB / (2·32·8·128·2 B · 16 tokens) = 24,576 blocks; block 0 is vLLM's null block, so
    # (24,576 − 1) // 512 = 47 requests of 8,192 tokens, while the log prints 48.00x
    # (vLLM's "Maximum concurrency" counts the null block too; docs/engine-rules.md).
    response = client.get(QUESTION_URL)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    said = sentence(response.text)
    assert said.startswith("47 requests of 8,192 tokens fit in 48 GiB")
    assert "vLLM's log will say 48.00x, as it also counts the reserved block" in said
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
    # A page user is pointed at what the page offers, not at the API.
    said = error_text(unknown.text, "model")
    assert "Not in the catalog" in said and "paste its config.json" in said
    assert "/api/v1" not in said
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
        # The config field the core names stays in the message (issue 16, item 5). Without a
        # model_type (LlamaConfig's defaults would fill every field, as transformers does).
        ('{"vocab_size": 1000}', "This config.json cannot be used: num_hidden_layers is"),
        (
            '{"hidden_size": 4096}',
            "This config.json cannot be used: num_hidden_layers is required",
        ),
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
    # A hidden input (the last answer's query) is no control anyone sees or labels.
    controls = [
        a
        for t, a in markup.tags
        if t in {"input", "select", "textarea"} and a.get("type") != "hidden"
    ]
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
        per_layer_overhead_seconds: float | None = None
        matmul_flops_per_s: float | None = None

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
    response = client.get("/?model=meta-llama/Llama-3.1-8B&kv_budget_gib=48&bandwidth_tbps=1e-30")
    assert response.status_code == 200
    assert error_text(response.text, "bandwidth_tbps")  # refused next to its field


def test_every_field_error_shows_at_once(client: TestClient) -> None:
    # The TP error comes from the planner; a bad context used to hide it until fixed.
    response = client.get(
        "/?model=meta-llama/Llama-3.1-8B&kv_budget_gib=48&context_tokens=lots&tensor_parallel_size=3"
    )
    assert "Enter a whole number of tokens" in error_text(response.text, "context_tokens")
    assert "divisible by tensor_parallel_size (3)" in error_text(
        response.text, "tensor_parallel_size"
    )
    assert 'data-answer="no"' in response.text


def test_headline_gives_the_number_that_runs(client: TestClient) -> None:
    # H200 at 512 tokens: memory holds more than vLLM's default max_num_seqs for a GPU of
    # at least 70 GiB (1,024, vllm/engine/arg_utils.py), so 1,024 is the number that runs.
    response = client.get("/?model=meta-llama/Llama-3.1-8B&gpu=H200-141GB&context_tokens=512")
    said = sentence(response.text)
    assert said.startswith("1,024 requests of 512 tokens run at once")
    api = client.post(
        "/api/v1/plan",
        json={"model": "meta-llama/Llama-3.1-8B", "gpu": "H200-141GB", "context_tokens": 512},
    ).json()["capacity"]
    assert api["max_requests"] > 1024 and api["max_running_requests"] == 1024
    cap = re.search(r'id="running-cap">(.*?)</p>', response.text, re.S)
    assert cap is not None
    assert f"Memory holds {api['max_requests']:,}" in html.unescape(cap.group(1))
    assert "--max-num-seqs, its default" in html.unescape(cap.group(1))
    # Given explicitly, the cap is no longer "its default".
    response = client.get(
        "/?model=meta-llama/Llama-3.1-8B&gpu=H200-141GB&context_tokens=512&max_num_seqs=256"
    )
    assert sentence(response.text).startswith("256 requests of 512 tokens run at once")


def test_nothing_fits_shows_no_decode_step(client: TestClient) -> None:
    response = client.get("/?model=meta-llama/Llama-3.1-70B&gpu=RTX-4090-24GB&context_tokens=8192")
    assert sentence(response.text).startswith("No request of 8,192 tokens fits")
    assert "no batch to decode" in response.text
    assert "Decode step</span>" not in response.text


def test_a_zero_budget_blames_the_budget_not_the_weights(client: TestClient) -> None:
    response = client.get("/?model=meta-llama/Llama-3.1-8B&kv_budget_gib=0&context_tokens=8192")
    assert "A KV cache budget of 0 GiB holds no request." in response.text
    assert "The weights and the reserve" not in response.text


def test_pages_have_an_h1_and_link_each_other(client: TestClient) -> None:
    for path in ("/", QUESTION_URL, "/reconcile"):
        markup = parse(client.get(path).text)
        assert [t for t, _ in markup.tags].count("h1") == 1, path
    assert 'href="/reconcile"' in client.get("/").text
    assert 'href="/reconcile"' in client.get(QUESTION_URL).text


def test_enter_submits_the_form_not_the_language_toggle(client: TestClient) -> None:
    # Implicit submission clicks the form's default button: its first submit button in tree
    # order, counting buttons outside it that name it with form="…" (the language toggle).
    pages = (("/", "plan-form"), ("/reconcile", "reconcile-form"), ("/explain", "explain-form"))
    for path, form_id in pages:
        text = client.get(path).text
        start = text.index(f'<form id="{form_id}"')
        end = text.index("</form>", start)
        owned = [
            m
            for m in re.finditer(r"<button\b[^>]*>", text)
            if 'type="submit"' in m.group(0)
            and (start < m.start() < end or f'form="{form_id}"' in m.group(0))
        ]
        assert owned, path
        assert 'name="lang"' not in owned[0].group(0), (path, owned[0].group(0))


def test_the_dtype_list_follows_the_engine(client: TestClient) -> None:
    # vLLM has no int4 KV cache (the engines registry): the form does not offer it; TRT-LLM does.
    def options(query: str) -> list[str]:
        text = client.get("/?model=meta-llama/Llama-3.1-8B&kv_budget_gib=48" + query).text
        select = re.search(r'<select id="f-kv_cache_dtype".*?</select>', text, re.S)
        assert select is not None
        return re.findall(r'<option value="([^"]*)"', select.group(0))

    assert "int4" not in options("")
    assert "int4" in options("&engine=trtllm")
    # Asked anyway (an old URL), vLLM's refusal lands on the field instead of an answer.
    response = client.get("/?model=meta-llama/Llama-3.1-8B&kv_budget_gib=48&kv_cache_dtype=int4")
    assert "int4" in error_text(response.text, "kv_cache_dtype")
    assert 'data-answer="no"' in response.text


def test_launch_command_on_request(client: TestClient) -> None:
    url = QUESTION_URL.replace("kv_budget_gib=48", "gpu=H100-SXM-80GB")
    answer = client.get(url)
    # Not computed on every answer (a recommendation searches many plans): a link asks for it.
    assert 'id="launch"' not in answer.text
    link = re.search(r'<p class="launch-link"><a href="([^"]+)"', answer.text)
    assert link is not None and "launch=1" in html.unescape(link.group(1))
    card = client.get(html.unescape(link.group(1)).split("#")[0]).text
    command = re.search(r'<pre class="command"><code translate="no">([^<]+)</code>', card)
    assert command is not None
    api = client.post(
        "/api/v1/plan",
        json={
            "model": "meta-llama/Llama-3.1-8B",
            "kv_cache_dtype": "bf16",
            "context_tokens": 8192,
            "gpu": "H100-SXM-80GB",
        },
    ).json()["capacity"]
    # The command holds exactly the requests this answer says run, at this context.
    said = html.unescape(command.group(1))
    assert said.startswith("vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 1")
    assert f"--max-num-seqs {api['max_running_requests']}" in said
    assert "--max-model-len 8192" in said
    # Without a GPU there is nothing to launch on, and a typed-in budget has no launch flag.
    assert "launch-link" not in client.get(QUESTION_URL).text
    assert "launch-link" not in client.get(QUESTION_URL + "&gpu=H100-SXM-80GB").text


def test_a_refused_catalog_id_is_not_called_a_config_json(client: TestClient) -> None:
    # Nothing pasted: the refusal names the id typed, and no "this config.json".
    response = client.get("/", params={"model": "zai-org/GLM-5", "kv_budget_gib": "48"})
    text = error_text(response.text, "model")
    assert "zai-org/GLM-5" in text and "config.json cannot be used" not in text


def test_the_engine_release_in_the_url_is_the_release_answered(client: TestClient) -> None:
    # Issue 25 item 8: `&engine_version=0.10` used to answer with 0.33. The question's explicit
    # bf16 cache is refused by 0.10's own CacheConfig (fixtures/vllm/0.10.2), so ask for auto.
    response = client.get(QUESTION_URL.replace("=bf16", "=auto") + "&engine_version=0.10")
    assert 'data-answer="yes"' in response.text
    assert "vLLM 0.10, bf16" in html.unescape(re.sub(r"<[^>]+>", "", response.text))
    refused = client.get(QUESTION_URL + "&engine_version=0.5")
    assert "not a supported release" in error_text(refused.text, "engine_version")


def test_a_parameter_the_page_does_not_know_is_an_error(client: TestClient) -> None:
    response = client.get(QUESTION_URL + "&engine_versoin=0.10")
    assert 'data-answer="no"' in response.text
    assert "engine_versoin" in html.unescape(response.text.split('id="error-summary"')[1][:600])
    # Kept through the tidy-URL redirect of a GET form submission with empty fields.
    redirected = client.get(QUESTION_URL + "&gpu=&engine_versoin=0.10", follow_redirects=False)
    assert redirected.status_code == 303
    assert "engine_versoin=0.10" in redirected.headers["location"]


def test_a_mistake_keeps_the_last_answer_marked_stale(client: TestClient) -> None:
    last = quote(QUESTION_URL[2:], safe="/")
    response = client.get(QUESTION_URL.replace("8192", "32kk") + "&last=" + last)
    assert 'data-answer="stale"' in response.text
    assert sentence(response.text).startswith("47 requests of 8,192 tokens fit in 48 GiB")
    assert "Unknown unit in 32kk" in error_text(response.text, "context_tokens")
    note = parse(response.text).by_id("stale-note")
    assert note is not None and "hidden" not in note
    # The answer's own link is the last good question, without `last`.
    link = parse(response.text).by_id("share-link")
    assert link is not None and link.get("href") == QUESTION_URL
    # A form POST (Enter) with the mistake carries `last` into the redirect.
    posted = client.post(
        "/",
        data={**QUESTION, "context_tokens": "32kk", "last": QUESTION_URL[2:]},
        follow_redirects=False,
    )
    assert posted.status_code == 303 and "last=" in posted.headers["location"]
    # And the language switch does too.
    switched = client.post(
        "/lang",
        data={**QUESTION, "context_tokens": "32kk", "last": QUESTION_URL[2:], "lang": "zh"},
        follow_redirects=True,
    )
    assert 'data-answer="stale"' in switched.text and 'lang="zh-Hans"' in switched.text


def test_sglang_settings_show_only_with_sglang(client: TestClient) -> None:
    hidden = parse(client.get(QUESTION_URL).text).by_id("sglang-fields")
    assert hidden is not None and "hidden" in hidden
    shown = parse(client.get(QUESTION_URL + "&engine=sglang").text).by_id("sglang-fields")
    assert shown is not None and "hidden" not in shown
    # A flag set with vLLM shows too: its error (vLLM has none) must be visible.
    response = client.get(QUESTION_URL + "&max_total_tokens=40960")
    fieldset = parse(response.text).by_id("sglang-fields")
    assert fieldset is not None and "hidden" not in fieldset
    assert "SGLang setting" in error_text(response.text, "max_total_tokens")


def test_no_launch_link_for_a_setup_the_recommender_cannot_carry(client: TestClient) -> None:
    # /api/v1/recommend has no engine_version or speculative_config: its command would run
    # another setup than the answer's.
    on_gpu = QUESTION_URL.replace("kv_budget_gib=48", "gpu=H100-SXM-80GB")
    assert "launch=1" in client.get(on_gpu).text
    assert "launch=1" not in client.get(on_gpu + "&engine_version=0.10").text


HYBRID_SGLANG_URL = "/?model=Qwen/Qwen3.5-27B&engine=sglang&context_tokens=32768&gpu=H200-141GB"


def test_sglang_state_pool_flags_reach_the_answer(client: TestClient) -> None:
    # The three state-pool flags are inputs of the SGLang fieldset, and the page plans with
    # them exactly as the API does (the pool rules are pinned to SGLang's code in the oracle).
    from planner.core.schema import PlanRequest
    from planner.service import plan

    flags = "&mamba_full_memory_ratio=0.5&max_mamba_cache_size=64&mamba_ssm_dtype=bfloat16"
    response = client.get(HYBRID_SGLANG_URL + flags)
    markup = parse(response.text)
    for name, value in (
        ("mamba_full_memory_ratio", "0.5"),
        ("max_mamba_cache_size", "64"),
    ):
        field = markup.by_id(f"f-{name}")
        assert field is not None and field.get("value") == value, name
    select = re.search(r'<select[^>]*id="f-mamba_ssm_dtype".*?</select>', response.text, re.S)
    assert select and '<option value="bfloat16" selected' in select.group(0)
    body = {
        "model": "Qwen/Qwen3.5-27B",
        "engine": "sglang",
        "context_tokens": 32768,
        "gpu": "H200-141GB",
        "mamba_full_memory_ratio": 0.5,
        "max_mamba_cache_size": 64,
        "mamba_ssm_dtype": "bfloat16",
    }
    capacity = plan(PlanRequest.model_validate(body)).capacity
    assert capacity is not None and capacity.state_pool_slots == 64  # the slots asked
    said = sentence(response.text)
    assert said.startswith(f"{capacity.max_requests} requests of 32,768 tokens fit")
    assert "64 slots of" in html.unescape(response.text)
    # Without the flags the pool is SGLang's default one: another answer.
    default = plan(PlanRequest.model_validate({k: body[k] for k in list(body)[:4]})).capacity
    assert default is not None and default.state_pool_slots != 64


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("mamba_full_memory_ratio", "0", "Enter a number above 0 and at most 1,000"),
        ("max_mamba_cache_size", "0", "Enter a number from 1 to 16,777,216"),
        ("mamba_ssm_dtype", "fp8", "Choose one of: float32, bfloat16, float16"),
    ],
)
def test_a_bad_state_pool_flag_marks_its_field_and_keeps_the_answer(
    client: TestClient, name: str, text: str, says: str
) -> None:
    last = quote(HYBRID_SGLANG_URL[2:], safe="/")
    good = sentence(client.get(HYBRID_SGLANG_URL).text)
    response = client.get(f"{HYBRID_SGLANG_URL}&{name}={text}&last={last}")
    assert 'data-answer="stale"' in response.text
    assert sentence(response.text) == good
    assert says in error_text(response.text, name)
    fieldset = parse(response.text).by_id("sglang-fields")
    assert fieldset is not None and "hidden" not in fieldset


def test_state_pool_flags_are_labelled_in_chinese(client: TestClient) -> None:
    response = client.get(HYBRID_SGLANG_URL, headers={"accept-language": "zh-CN,zh;q=0.9"})
    text = html.unescape(response.text)
    assert "状态池比例（--mamba-full-memory-ratio）" in text
    assert "状态池槽位数（--max-mamba-cache-size）" in text
    assert "循环状态数据类型（--mamba-ssm-dtype）" in text
    bad = client.get(
        HYBRID_SGLANG_URL + "&mamba_full_memory_ratio=0",
        headers={"accept-language": "zh-CN,zh;q=0.9"},
    )
    assert "请输入大于 0 且不超过 1,000 的数" in error_text(bad.text, "mamba_full_memory_ratio")
