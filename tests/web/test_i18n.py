"""zh/en: negotiation, the sticky toggle, and a message catalog that covers every string."""

from __future__ import annotations

import re
from io import BytesIO
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po
from starlette.testclient import TestClient

from planner.web.i18n import COOKIE_NAME, Numbers, negotiate, translations
from planner.web.paths import locale_dir
from tests.web.conftest import QUESTION, QUESTION_URL, XSS_CONFIG_TEXT, parse
from tests.web.test_page import error_text, sentence

REPO = Path(__file__).resolve().parents[2]
ZH = {"accept-language": "zh-CN,zh;q=0.9,en;q=0.8"}
EN = {"accept-language": "en-US,en;q=0.9"}


@pytest.mark.parametrize(
    ("cookie", "header", "expected"),
    [
        (None, None, "en"),
        (None, "zh-CN,zh;q=0.9,en;q=0.8", "zh"),
        (None, "zh-TW", "zh"),
        (None, "fr-FR,fr;q=0.9,zh;q=0.5", "zh"),
        (None, "en;q=0.5,zh;q=0.8", "zh"),
        (None, "zh;q=0,en", "en"),
        (None, "fr, de", "en"),
        (None, ";;;,q=abc", "en"),
        ("en", "zh-CN", "en"),
        ("zh", "en", "zh"),
        ("xx", "zh", "zh"),
    ],
)
def test_negotiate(cookie: str | None, header: str | None, expected: str) -> None:
    assert negotiate(cookie, header) == expected


def test_accept_language_picks_chinese(client: TestClient) -> None:
    response = client.get(QUESTION_URL, headers=ZH)
    assert response.status_code == 200
    assert '<html lang="zh-Hans">' in response.text
    assert response.headers["content-language"] == "zh-Hans"
    assert "Accept-Language" in response.headers["vary"]
    said = sentence(response.text)
    assert "47" in said and "8,192" in said and "48 GiB" in said and "48.00x" in said
    assert "可容纳" in said and "1 个预留块也算了进去" in said


def test_errors_in_the_users_language(client: TestClient) -> None:
    response = client.get("/?model=meta-llama/Llama-3.1-8B&context_tokens=abc", headers=ZH)
    assert response.status_code == 200
    assert "请输入整数" in error_text(response.text, "context_tokens")


def test_toggle_sets_a_cookie_that_sticks(client: TestClient) -> None:
    form = {**QUESTION, "lang": "zh", "gpu": ""}
    response = client.post("/lang", data=form, headers=EN, follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == QUESTION_URL
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE_NAME}=zh;")
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Path=/" in cookie
    # The cookie beats the browser's preference on every later page.
    page = client.get(QUESTION_URL, headers=EN)
    assert '<html lang="zh-Hans">' in page.text
    assert "可容纳" in sentence(page.text)
    assert '<html lang="zh-Hans">' in client.get("/", headers=EN).text
    back = client.post("/lang", data={"lang": "en"}, headers=ZH, follow_redirects=False)
    assert back.headers["location"] == "/"
    assert '<html lang="en">' in client.get("/", headers=ZH).text


def test_toggle_keeps_a_pasted_config(client: TestClient) -> None:
    config = XSS_CONFIG_TEXT.replace("<", "").replace(">", "")
    data = {"lang": "zh", "model_config": config, "context_tokens": "8192", "kv_budget_gib": "48"}
    response = client.post("/lang", data=data, follow_redirects=False)
    assert response.status_code == 200
    assert response.headers["set-cookie"].startswith(f"{COOKIE_NAME}=zh;")
    assert "47" in sentence(response.text) and "可容纳" in sentence(response.text)


def test_toggle_ignores_an_unknown_language(client: TestClient) -> None:
    response = client.post("/lang", data={"lang": "xx"}, headers=ZH, follow_redirects=False)
    assert response.headers["set-cookie"].startswith(f"{COOKIE_NAME}=zh;")


def test_toggle_buttons_name_the_other_language(client: TestClient) -> None:
    markup = parse(client.get("/", headers=EN).text)
    buttons = [a for t, a in markup.tags if t == "button" and a.get("name") == "lang"]
    assert [(b["value"], b["formaction"], b["form"]) for b in buttons] == [
        ("zh", "/lang", "plan-form")
    ]


_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def _catalog() -> dict[object, object]:
    path = locale_dir() / "zh" / "LC_MESSAGES" / "messages.po"
    with path.open("rb") as po:
        catalog = read_po(po)
    return {m.id: m for m in catalog if m.id}


def test_catalog_covers_every_message_in_the_sources() -> None:
    """Every `_()`/`ngettext` in templates and planner/web, every note and error template and
    the catalog's remarks, has a
    Chinese translation, and the catalog holds nothing the sources no longer use (the mapping of
    planner/locale/babel.cfg; `python scripts/update_locale.py` refreshes the catalog)."""
    method_map = [
        ("planner/web/**.py", "python"),
        ("templates/**.html", "jinja2"),
        ("planner/core/notes.py", "planner.web.i18n:extract_notes"),
        ("planner/core/errors.py", "planner.web.i18n:extract_errors"),
    ]
    options = {"templates/**.html": {"extensions": "jinja2.ext.i18n"}}
    extracted = {
        (m[2] if isinstance(m[2], str) else tuple(m[2]))
        for m in extract_from_dir(str(REPO), method_map, options)
    }
    catalog = _catalog()
    assert extracted, "no messages extracted"
    assert extracted - set(catalog) == set(), "run pybabel extract/update and translate"
    assert set(catalog) - extracted == set(), "obsolete entries in the zh catalog"
    for msgid, message in catalog.items():
        assert not message.fuzzy, msgid  # type: ignore[attr-defined]
        strings = message.string  # type: ignore[attr-defined]
        strings = [strings] if isinstance(strings, str) else list(strings)
        assert all(s.strip() for s in strings), f"untranslated: {msgid!r}"
        ids = [msgid] if isinstance(msgid, str) else list(msgid)  # type: ignore[arg-type]
        wanted = set().union(*(_PLACEHOLDER.findall(i) for i in ids))
        for s in strings:
            got = set(_PLACEHOLDER.findall(s))
            # A singular may say "one" instead of %(num)s; the translation must keep the rest.
            assert got <= wanted | {"num"} and wanted - {"num"} <= got, msgid


def test_catalog_compiles() -> None:
    zh = translations("zh")
    assert zh.gettext("Model") == "模型"
    assert zh.ngettext("%(num)s request", "%(num)s requests", 5) == "%(num)s 个请求"
    assert BytesIO  # compiled in memory; no .mo file in the tree
    assert not list(locale_dir().rglob("*.mo"))


def test_chinese_page_has_no_untranslated_ui_text(client: TestClient) -> None:
    """English runs of three or more words on the zh page may only be data: notes (marked
    lang="en"), code, option values and model names."""
    pages = [
        client.get(QUESTION_URL + "&gpu=H100-SXM-80GB", headers=ZH).text,
        client.get(
            "/?model=meta-llama/Llama-3.1-8B&context_tokens=abc&tensor_parallel_size=0", headers=ZH
        ).text,
        client.get("/", headers=ZH).text,
    ]
    english = re.compile(r"\b[A-Za-z]{3,}\s+[A-Za-z]{3,}\s+[A-Za-z]{3,}\b")
    allowed = ("code", "option", "datalist", "@en", "script")
    for text in pages:
        for path, data in parse(text).texts:
            if any(part in path for part in allowed):
                continue
            assert not english.search(data), (path, data)


def test_numbers_are_grouped_and_labelled() -> None:
    for lang in ("en", "zh"):
        fmt = Numbers(lang)
        assert fmt.num(393200) == "393,200"
        assert fmt.gib(48 << 30) == "48.00 GiB"
        assert fmt.gib_short(48 << 30) == "48 GiB"
        assert fmt.bytes(131072) == "128 KiB"
        assert fmt.tbps(3.35e12) == "3.35 TB/s"
        # A CPU calibration's 7.51 GB/s (1 GB/s = 10^9 B/s) must not round to "0.01 TB/s".
        assert fmt.tbps(7.51e9) == "7.51 GB/s"
        assert fmt.ms(0.01986) == "19.86 ms"


def test_numbers_beyond_fixed_point_print_scientific() -> None:
    """babel's fixed-point rounding raised decimal.InvalidOperation from 10^28 up (a decode step
    of 10^30 ms at a tiny bandwidth): such values print as 1.00E30 in every language."""
    from planner.web.i18n import Numbers

    for lang in ("en", "zh"):
        fmt = Numbers(lang)
        assert fmt.dec(1e30) == "1.00E30"
        assert fmt.ms(1e27) == "1.00E30 ms"
        assert fmt.dec(float("inf")) == "—"
    assert Numbers("en").dec(123456.789) == "123,456.79"


def _fields(template: str) -> dict[str, str]:
    import string

    return {f: spec for _, f, spec, _ in string.Formatter().parse(template) if f is not None}


def test_every_note_code_has_a_chinese_entry_with_the_same_params() -> None:
    from planner.core.notes import TEMPLATES
    from planner.web.i18n import _is_data, translations

    catalog = translations("zh")
    missing, broken = [], []
    for code, template in TEMPLATES.items():
        if _is_data(template):
            continue  # a catalog entry's own remark: data, shown as written
        zh = catalog.gettext(template)
        if zh == template:
            missing.append(code)
        elif not set(_fields(zh)) <= set(_fields(template)) or any(
            _fields(template)[f] != spec for f, spec in _fields(zh).items()
        ):
            broken.append(code)
    assert missing == [] and broken == []


def test_notes_read_in_chinese_with_their_numbers() -> None:
    from planner.core.schema import NoteOut
    from planner.web.i18n import show_note

    shown = show_note(
        NoteOut(
            code="capacity.null_block",
            params={"ctx": 8192, "reported": 48.0, "num_blocks": 24576, "need": 512, "fit": 47},
            text="(English)",
        ),
        "zh",
    )
    assert shown.lang is None
    assert "48.00x" in shown.text and "24,576" in shown.text and "47 个" in shown.text
    assert "null 块" in shown.text
    # A note the catalog cannot translate stays English, and says so with lang="en".
    unknown = show_note(NoteOut(code="no.such.code", params={}, text="Plain English."), "zh")
    assert unknown.lang == "en" and unknown.text == "Plain English."
    data = show_note(NoteOut(code="model.catalog_note", params={"text": "x"}, text="x"), "zh")
    assert data.lang == "en"


def test_every_error_code_has_a_chinese_entry_with_the_same_params() -> None:
    from planner.core.errors import ERROR_TEMPLATES
    from planner.web.i18n import _is_data, translations

    catalog = translations("zh")
    missing, broken = [], []
    for code, template in ERROR_TEMPLATES.items():
        if _is_data(template):
            continue  # a pass-through of English from outside the registry
        zh = catalog.gettext(template)
        if zh == template:
            missing.append(code)
        elif _fields(zh) != _fields(template):
            broken.append(code)
    assert missing == [] and broken == []


def test_core_errors_read_in_chinese_with_their_numbers(client: TestClient) -> None:
    # Llama-3.1-8B has 32 attention heads: vLLM refuses tensor_parallel_size 3 and names the
    # sizes that divide them (engine.requires_num_attention_heads).
    url = "/?model=meta-llama/Llama-3.1-8B&context_tokens=8192&gpu=H100-SXM-80GB"
    response = client.get(url + "&tensor_parallel_size=3", headers=ZH)
    said = error_text(response.text, "tensor_parallel_size")
    assert "vLLM 要求 num_attention_heads（32）能被 tensor_parallel_size（3）整除" in said
    assert "[1, 2, 4, 8, 16, 32]" in said
    slot = re.search(r'<p class="error" id="e-tensor_parallel_size".*?</p>', response.text, re.S)
    assert slot is not None and 'lang="en"' not in slot.group(0)
    english = client.get(url + "&tensor_parallel_size=3", headers=EN)
    assert "vLLM requires num_attention_heads (32) divisible by tensor_parallel_size (3)" in (
        error_text(english.text, "tensor_parallel_size")
    )


def test_catalog_remarks_read_in_chinese(client: TestClient) -> None:
    # Mixtral-8x7B's catalog entry carries a remark on its sliding_window (models.json).
    url = "/?model=mistralai/Mixtral-8x7B-v0.1&context_tokens=8192&kv_budget_gib=48"
    response = client.get(url, headers=ZH)
    assert "本条目使用 null" in response.text
    assert "this entry uses null" not in response.text


def test_error_messages_format_from_code_and_params_in_chinese() -> None:
    from planner.core.errors import FieldError, Message
    from planner.web.i18n import message_text

    gettext = translations("zh").gettext
    exc = FieldError("context_tokens", "cli.tokens_unreadable",
                     reason=Message.of("quantity.not_a_number", text="abc"))  # fmt: skip
    assert message_text(exc.problems[0].message, gettext) == (
        "无法把 'abc' 读作数字；请写成 token 数，例如 8192 或 8k（k = 1024）"
    )
    # Bare English (an unconverted raise site) has no translation: the page shows it as English.
    assert message_text(Message.of("plain words"), gettext) is None
