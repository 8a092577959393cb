"""The /explain page: the seeds' worked examples, each number computed by the lab core.

Values are pinned to the seeds, not to what the page printed: seed 000 (softmax [0, ln2, ln3]
-> [1, 2, 3]/6 over V = [2, 4, 8] -> 34/6; P = 3 cached + T = 2 chunk, top-left Q3 sees only
K0; 5 tokens in a 4-slot ring, slot = position mod capacity), seed 003 (3·n·d² + 2·n·d vs
3·d² + 2·n·d multiplications) and seed 004 (4+5+6 = 15 vs 4+1+1 = 6 positions; §04's table).
"""

from __future__ import annotations

import html
import re
from fractions import Fraction

import pytest
from starlette.testclient import TestClient

from planner.api.security import CONTENT_SECURITY_POLICY
from planner.lab.reference import softmax_example
from planner.web.i18n import COOKIE_NAME
from tests.web.conftest import parse
from tests.web.test_page import error_text

ZH = {"accept-language": "zh-CN,zh;q=0.9"}


def text(fragment: str) -> str:
    """Visible text: inline tags vanish, block and cell tags become spaces."""
    inline = re.sub(r"</?(?:strong|code|span|a)\b[^>]*>", "", fragment)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", inline))).strip()


def element(page: str, element_id: str, tag: str) -> str:
    match = re.search(rf'<{tag}[^>]*id="{element_id}"[^>]*>(.*?)</{tag}>', page, re.S)
    assert match, element_id
    return match.group(1)


def table_rows(page: str, table_id: str) -> list[list[str]]:
    """Body rows of a table as cell texts (header cell first)."""
    body = element(page, table_id, "table")
    tbody = re.search(r"<tbody>(.*?)</tbody>", body, re.S)
    assert tbody
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", tbody.group(1), re.S)
    return [[text(c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, re.S)] for r in rows]


def grid(page: str, table_id: str) -> dict[str, list[int]]:
    """Query label -> key columns marked as seen in a mask grid."""
    out: dict[str, list[int]] = {}
    body = element(page, table_id, "table")
    for row in re.findall(r"<tr>(<th scope=\"row\">.*?)</tr>", body, re.S):
        label = text(re.search(r"<th[^>]*>(.*?)</th>", row, re.S).group(1))  # type: ignore[union-attr]
        cells = re.findall(r'<td class="cell ([^"]*)"', row)
        out[label] = [j for j, cls in enumerate(cells) if "sees" in cls.split()]
    return out


def test_renders_in_english_and_chinese(client: TestClient) -> None:
    en = client.get("/explain")
    assert en.status_code == 200
    assert en.headers["content-type"].startswith("text/html")
    assert '<html lang="en">' in en.text
    assert "How the KV cache works" in en.text
    zh = client.get("/explain", headers=ZH)
    assert zh.status_code == 200
    assert '<html lang="zh-Hans">' in zh.text
    assert zh.headers["content-language"] == "zh-Hans"
    # Seed 000 / 004 terms.
    for words in ("一行 attention，真的算出一个数", "缓存长度", "绝对位置", "物理槽位", "仍然做"):
        assert words in zh.text, words
    for section in ("softmax", "mask", "ring", "passes", "decode", "counts"):
        assert f'id="{section}"' in en.text and f'id="{section}"' in zh.text


def test_chinese_page_has_no_untranslated_ui_text(client: TestClient) -> None:
    page = client.get("/explain?cached_tokens=x", headers=ZH).text
    english = re.compile(r"\b[A-Za-z]{3,}\s+[A-Za-z]{3,}\s+[A-Za-z]{3,}\b")
    for path, data in parse(page).texts:
        if "code" in path or "@en" in path:
            continue
        assert not english.search(data), (path, data)


def test_softmax_worked_example_is_exact(client: TestClient) -> None:
    page = client.get("/explain").text
    rows = table_rows(page, "softmax-table")
    # Seed 000: scaled logits [0, ln 2, ln 3]; exp [1, 2, 3]; divided by 6; V = [2, 4, 8].
    assert [r[1].split(" ≈")[0] for r in rows] == ["0", "ln 2", "ln 3"]
    assert [r[2] for r in rows] == ["1", "2", "3"]
    assert re.findall(r'data-weight="([^"]+)"', page) == ["1/6", "2/6", "3/6"]
    assert [r[4] for r in rows] == ["2", "4", "8"]
    assert [r[5] for r in rows] == ["2/6", "8/6", "24/6"]
    assert text(element(page, "softmax-output", "td")) == "34/6"
    assert "34/6 ≈ 5.667" in text(element(page, "softmax", "section"))
    # The page's fraction is the core's exact result.
    assert softmax_example().output_exact == Fraction(34, 6)
    assert "Scaled logits [0, ln 2, ln 3]; exp gives [1, 2, 3], divided by their sum 6." in text(
        page
    )


def test_chunk_after_cache_wrong_alignment_sees_only_k0(client: TestClient) -> None:
    page = client.get("/explain").text  # defaults: P = 3, T = 2 (seed 000)
    correct = grid(page, "mask-correct")
    wrong = grid(page, "mask-wrong")
    assert correct == {"Q3": [0, 1, 2, 3], "Q4": [0, 1, 2, 3, 4]}
    # Seed 000: a top-left 2×5 lower triangle lets Q3 see only K0.
    assert wrong["Q3"] == [0]
    assert wrong["Q4"] == [0, 1]
    assert "The mask is 2 × 5, not 2 × 2." in text(page)
    verdict = text(element(page, "mask-verdict", "p"))
    assert "Q3 sees only K0 instead of K0–K3" in verdict


@pytest.mark.parametrize(("p", "t"), [(0, 1), (0, 3), (1, 1), (5, 3), (16, 8)])
def test_mask_grid_for_chosen_p_and_t(client: TestClient, p: int, t: int) -> None:
    page = client.get(f"/explain?cached_tokens={p}&chunk_tokens={t}").text
    # Causal rule: chunk query i sits at absolute position P + i and sees keys 0..P+i;
    # the top-left bug lets it see 0..i only.
    assert grid(page, "mask-correct") == {f"Q{p + i}": list(range(p + i + 1)) for i in range(t)}
    assert grid(page, "mask-wrong") == {f"Q{p + i}": list(range(i + 1)) for i in range(t)}
    verdict = text(element(page, "mask-verdict", "p"))
    if p == 0:
        assert "the two alignments agree" in verdict
    else:
        assert f"Q{p} sees only" in verdict


def test_ring_slots_keep_position_slot_and_length_apart(client: TestClient) -> None:
    page = client.get("/explain").text  # seed 000: 5 tokens, capacity 4
    rows = re.findall(r'data-position="(\d+)" data-slot="(\d+)" data-cache-tokens="(\d+)"', page)
    # Positions 0..4 written, then the next token at position 5 (RoPE keeps growing).
    assert [tuple(map(int, r)) for r in rows] == [
        (pos, pos % 4, min(pos + 1, 4)) for pos in range(6)
    ]
    body = table_rows(page, "ring-table")
    assert body[4][-2] == "4 1 2 3"  # after position 4: slot 0 rewritten
    assert body[5][-2] == "4 5 2 3"  # the next token lands in slot 5 mod 4 = 1
    summary = text(element(page, "ring-summary", "p"))
    assert "the cache length is 4, the newest absolute position is 4" in summary
    assert "slot 4 mod 4 = 0" in summary
    nxt = text(element(page, "ring-next", "p"))
    assert "position 5, slot 5 mod 4 = 1, cache length 4" in nxt
    assert "It overwrites position 1" in nxt


def test_ring_with_chosen_tokens_and_capacity(client: TestClient) -> None:
    page = client.get("/explain?ring_tokens=7&ring_capacity=3").text
    rows = re.findall(r'data-position="(\d+)" data-slot="(\d+)" data-cache-tokens="(\d+)"', page)
    assert [tuple(map(int, r)) for r in rows] == [
        (pos, pos % 3, min(pos + 1, 3)) for pos in range(8)
    ]
    # After position 6 the slots hold 6, 4, 5.
    assert table_rows(page, "ring-table")[6][-2] == "6 4 5"


def test_prefill_vs_decode_positions(client: TestClient) -> None:
    page = client.get("/explain").text
    rows = table_rows(page, "passes-table")
    # Seed 004 §01.
    assert [r[0] for r in rows] == ["E", "F", "G"]
    assert rows[0][1].startswith("A B C D: 4 positions")
    assert rows[2][1].startswith("A B C D E F: 6 positions")
    assert rows[0][2] == "A B C D: 4 positions, builds the cache"
    assert rows[1][2] == "E: 1 position, reads the cached history"
    total = text(element(page, "passes-total", "p"))
    assert "4+5+6 = 15 positions" in total and "4+1+1 = 6" in total
    assert "15/6 = 2.5 times" in text(page)


def test_what_decode_still_computes(client: TestClient) -> None:
    rows = table_rows(client.get("/explain").text, "decode-table")
    # Seed 004 §04: five operations; three still done, two usually not redone.
    assert [r[1] for r in rows] == [
        "still done",
        "usually not redone",
        "still done",
        "usually not redone",
        "still done",
    ]
    zh = table_rows(client.get("/explain", headers=ZH).text, "decode-table")
    assert zh[1] == ["历史位置的 K/V 投影", "通常不重做", "读取本层已经计算好的缓存。"]


def test_count_table_equals_the_closed_forms(client: TestClient) -> None:
    page = client.get("/explain").text
    assert "model dimension d = 8" in page
    d = 8
    body = element(page, "counts-table", "table")
    rows = re.findall(r'<tr data-n="(\d+)">(.*?)</tr>', body, re.S)
    assert [int(n) for n, _ in rows] == [1, 2, 4, 8, 16, 32]
    for n_text, row in rows:
        n = int(n_text)
        counts = [int(c) for c in re.findall(r'data-count="(\d+)"', row)]
        # Seed 003: no cache 3·n·d² + 2·n·d; cache 3·d² + 2·n·d.
        assert counts == [3 * n * d * d, 2 * n * d, 3 * d * d, 2 * n * d], n
        shown = [text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        assert shown[:4] == [f"{c:,}" for c in counts]
        assert shown[4] == "yes"
    summary = text(element(page, "counts-summary", "p"))
    assert "from 6,144 to 192; attention stays 512" in summary  # n = 32, d = 8


@pytest.mark.parametrize(
    ("query", "field", "fallback"),
    [
        ("cached_tokens=abc", "cached_tokens", "The mask is 2 × 5"),
        ("cached_tokens=-1", "cached_tokens", "The mask is 2 × 5"),
        ("cached_tokens=17", "cached_tokens", "The mask is 2 × 5"),
        ("cached_tokens=1e3", "cached_tokens", "The mask is 2 × 5"),
        ("chunk_tokens=0", "chunk_tokens", "The mask is 2 × 5"),
        ("chunk_tokens=99999999999999999999", "chunk_tokens", "The mask is 2 × 5"),
        ("ring_tokens=25", "ring_tokens", "after 5 tokens"),
        ("ring_capacity=0", "ring_capacity", "A window of 4 slots"),
        ("ring_capacity=%EF%BC%93", "ring_capacity", "A window of 4 slots"),  # full-width 3
    ],
)
def test_bad_values_are_shown_not_500(
    client: TestClient, query: str, field: str, fallback: str
) -> None:
    response = client.get("/explain?" + query)
    assert response.status_code == 200
    message = error_text(response.text, field)
    assert "Enter a whole number from" in message and "Showing the example" in message
    markup = parse(response.text)
    control = markup.by_id(f"f-{field}")
    assert control is not None and control.get("aria-invalid") == "true"
    summary = markup.by_id("error-summary")
    assert summary is not None and "hidden" not in summary
    assert fallback in text(response.text)


def test_bad_value_in_chinese(client: TestClient) -> None:
    response = client.get("/explain?chunk_tokens=9", headers=ZH)
    assert response.status_code == 200
    assert "请输入 1 到 8 之间的整数。" in error_text(response.text, "chunk_tokens")


@pytest.mark.parametrize(
    "url", ["/explain", "/explain?cached_tokens=abc&ring_capacity=3", "/explain?chunk_tokens=8"]
)
def test_csp_and_no_inline_code(client: TestClient, url: str) -> None:
    response = client.get(url)
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "default-src 'self'" in response.headers["content-security-policy"]
    markup = parse(response.text)
    assert not [t for t, _ in markup.tags if t == "style"], "no <style> blocks"
    assert not [a for _, a in markup.tags if "style" in a], "no style attributes"
    scripts = [a for t, a in markup.tags if t == "script"]
    assert all((a.get("src") or "").startswith("/static/") for a in scripts)
    assert not [a for _, a in markup.tags if any(k.startswith("on") for k in a)]
    sheets = [a.get("href") for t, a in markup.tags if t == "link" and a.get("rel") == "stylesheet"]
    assert sheets == ["/static/page.css", "/static/explain.css"]
    assert client.get("/static/explain.css").status_code == 200


def test_every_input_has_a_label_and_belongs_to_the_form(client: TestClient) -> None:
    markup = parse(client.get("/explain").text)
    controls = [a for t, a in markup.tags if t in {"input", "select", "textarea"}]
    labelled = {a.get("for") for t, a in markup.tags if t == "label"}
    assert len(controls) == 4
    for attrs in controls:
        assert attrs.get("id") in labelled, attrs
        assert attrs.get("form") == "explain-form"


def test_language_toggle_keeps_the_values(client: TestClient) -> None:
    buttons = [
        a for t, a in parse(client.get("/explain").text).tags if t == "button" and a.get("name")
    ]
    assert [(b["formaction"], b["form"]) for b in buttons] == [("/explain/lang", "explain-form")]
    response = client.post(
        "/explain/lang",
        data={"lang": "zh", "cached_tokens": "5", "chunk_tokens": "2", "ring_capacity": "x"},
        follow_redirects=False,
    )
    assert response.status_code == 303
    # Defaults and bad values are left out of the URL.
    assert response.headers["location"] == "/explain?cached_tokens=5"
    assert response.headers["set-cookie"].startswith(f"{COOKIE_NAME}=zh;")
    page = client.get(response.headers["location"]).text
    assert '<html lang="zh-Hans">' in page and "mask 是 2 × 7" in page


def test_the_main_page_links_here(client: TestClient) -> None:
    for url in ("/", "/reconcile"):
        nav = client.get(url).text
        assert '<nav class="site-nav"' in nav and 'href="/explain"' in nav
    page = client.get("/explain").text
    assert '<a href="/explain" aria-current="page">How it works</a>' in page
