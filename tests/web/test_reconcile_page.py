"""The /reconcile page in-process: a pasted fixture log reconciles in English and Chinese, form
mistakes land next to their field, pasted markup stays text, the toggle keeps the paste."""

from __future__ import annotations

import html
import json
import re

import pytest
from starlette.testclient import TestClient

from planner.web.i18n import COOKIE_NAME
from tests.core.test_logparse import load_fixtures
from tests.web.conftest import parse
from tests.web.test_page import error_text

FIXTURES = {f["id"]: f for f in load_fixtures()}
GRANITE_LOG = "\n".join(FIXTURES["vllm-v1-granite4-micro-fp8-l40s-ibmcodeengine"]["log_lines"])
GRANITE = json.dumps(
    {
        "_name_or_path": "ibm-granite/granite-4.0-micro",
        "num_hidden_layers": 40,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "hidden_size": 2560,
        "torch_dtype": "bfloat16",
    }
)
ZH = {"accept-language": "zh-CN,zh;q=0.9"}


def text_of(page: str, element_id: str, end: str = "</(?:section|div)>") -> str:
    match = re.search(rf'id="{element_id}"[^>]*>(.*?){end}', page, re.S)
    assert match, element_id
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", match.group(1)))).strip()


def test_start_page(client: TestClient) -> None:
    response = client.get("/reconcile")
    assert response.status_code == 200
    assert '<textarea id="f-log" name="log"' in response.text
    assert response.headers["cache-control"] == "no-store"


def test_pasted_fixture_reconciles(client: TestClient) -> None:
    response = client.post(
        "/reconcile",
        data={
            "log": GRANITE_LOG,
            "model_config": GRANITE,
            "gpu": "L40S-48GB",
            "memory_fraction": "0.9",
        },
    )
    assert response.status_code == 200
    page = response.text
    hero = text_of(page, "answer-hero")
    assert "1 equal, 1 consistent within rounding, 0 different" in hero
    checks = text_of(page, "checks", "</table>")
    # Fixture: logged 463,136 tokens, kvplan 463,200; rounding admits 28,946..28,954 blocks.
    assert "463,136" in checks and "463,200" in checks and "28,946–28,954" in checks
    assert "3.53x" in checks
    reserves = text_of(page, "reserves")
    assert "3.42 GiB" in reserves and "35.34 GiB" in reserves


def test_chinese(client: TestClient) -> None:
    response = client.post(
        "/reconcile", data={"log": GRANITE_LOG, "model_config": GRANITE}, headers=ZH
    )
    assert '<html lang="zh-Hans">' in response.text
    assert "在舍入范围内一致" in text_of(response.text, "checks", "</table>")
    # English runs on the zh page are data only: core figures, reasons and notes marked en.
    english = re.compile(r"\b[A-Za-z]{3,}\s+[A-Za-z]{3,}\s+[A-Za-z]{3,}\b")
    for path, data in parse(response.text).texts:
        if any(part in path for part in ("code", "option", "datalist", "@en", "textarea")):
            continue
        assert not english.search(data), (path, data)


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"log": ""}, "log", "empty"),
        ({"log": "nothing to see"}, "log", "no KV-cache start-up line"),
        ({"log": "abc\x00\x01\x02"}, "log", "binary"),
        ({"log": GRANITE_LOG, "engine": "sglang"}, "engine", "vLLM log"),
        ({"log": GRANITE_LOG, "tensor_parallel_size": "two"}, "tensor_parallel_size", "whole"),
        ({"log": GRANITE_LOG, "model_config": "{"}, "model_config", "JSON"),
        ({"log": GRANITE_LOG, "model": "no/such-model"}, "model", "paste its config.json"),
        ({"log": GRANITE_LOG, "memory_fraction": "2"}, "memory_fraction", "less than or equal"),
    ],
)
def test_mistakes_land_on_their_field(
    client: TestClient, data: dict[str, str], field: str, words: str
) -> None:
    response = client.post("/reconcile", data=data)
    assert response.status_code == 200
    assert words in error_text(response.text, field)
    assert "\x00" not in response.text


def test_pasted_markup_stays_text(client: TestClient) -> None:
    log = "<script>alert(1)</script>\n" + GRANITE_LOG + "\n<img src=x onerror=alert(2)>"
    response = client.post("/reconcile", data={"log": log, "model_config": GRANITE})
    markup = parse(response.text)
    assert not [t for t, _ in markup.tags if t == "img"]
    scripts = [a for t, a in markup.tags if t == "script"]
    assert all(a.get("src") for a in scripts)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in response.text  # kept in the textarea


def test_toggle_keeps_the_paste(client: TestClient) -> None:
    buttons = [
        a for t, a in parse(client.get("/reconcile").text).tags if t == "button" and a.get("name")
    ]
    assert [(b["formaction"], b["form"]) for b in buttons] == [
        ("/reconcile/lang", "reconcile-form")
    ]
    response = client.post(
        "/reconcile/lang",
        data={"lang": "zh", "log": GRANITE_LOG, "model_config": GRANITE},
        follow_redirects=False,
    )
    assert response.status_code == 200
    assert response.headers["set-cookie"].startswith(f"{COOKIE_NAME}=zh;")
    assert "在舍入范围内一致" in response.text
    empty = client.post("/reconcile/lang", data={"lang": "en"}, follow_redirects=False)
    assert (empty.status_code, empty.headers["location"]) == (303, "/reconcile")


def test_plan_link_for_a_catalog_model(client: TestClient) -> None:
    log = (
        "Available KV cache memory: 40.00 GiB\n"
        "GPU KV cache size: 327,680 tokens\n"
        "Maximum concurrency for 8,192 tokens per request: 40.00x\n"
    )
    page = client.post("/reconcile", data={"log": log, "model": "meta-llama/Llama-3.1-8B"}).text
    link = re.search(r'<a href="(/\?[^"]+)">', page)
    assert link is not None
    target = client.get(html.unescape(link.group(1)))
    # engine_rules.md §6.2: 40 GiB, 8k -> 40.00x, 39 requests with the null block.
    assert target.status_code == 200 and "39" in text_of(target.text, "answer-hero")


def test_headline_says_how_many_requests_fit(client: TestClient) -> None:
    # The line people grep for: "Maximum concurrency for 131,072 tokens per request: 3.13x".
    # 3.13x is not on a block boundary, so the null block leaves floor(3.13) = 3 resident.
    logged = re.search(
        r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x", GRANITE_LOG
    )
    assert logged is not None
    ctx, x = logged.group(1), float(logged.group(2))
    response = client.post("/reconcile", data={"log": GRANITE_LOG, "model_config": GRANITE})
    hero = text_of(response.text, "answer-hero", "</section>")
    assert hero.startswith(f"{int(x)} requests of {ctx} tokens fit in the memory this log reports")
    # The tally stays, below it; and /reconcile links back to the planner and vice versa.
    assert "vLLM log: " in hero
    zh = client.post("/reconcile", data={"log": GRANITE_LOG, "model_config": GRANITE}, headers=ZH)
    assert f"可容纳 {int(x)} 个 {ctx} token 的请求" in text_of(zh.text, "answer-hero", "</section>")
