"""Languages of the page: message catalogs (gettext `.po`, compiled in memory at first use),
negotiation from the cookie and `Accept-Language`, locale-aware number formatting, and the
planner's notes in the page's language.

English is the source language (msgids are English), so `en` needs no catalog. Catalogs are
`planner/locale/<lang>/LC_MESSAGES/messages.po`; `python scripts/update_locale.py` extracts the
page's messages, every note template (planner.core.notes), every error and reason template
(planner.core.errors) and the catalog's remarks into `messages.pot` and merges them into each
catalog. A note's or an error's msgid is its English template; the page formats the
translated template with the message's own params (a nested reason translated the same way),
so no English is parsed.
"""

from __future__ import annotations

import gettext
import math
import re
import string
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from io import BytesIO
from typing import Any

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.numbers import format_decimal, format_scientific
from babel.support import Translations

from planner.core.errors import ERROR_TEMPLATES, UNCODED, Message
from planner.core.notes import TEMPLATES
from planner.core.schema import NoteOut
from planner.web.paths import locale_dir

LANGUAGES: tuple[str, ...] = ("en", "zh")
DEFAULT_LANGUAGE = "en"
COOKIE_NAME = "kvplan_lang"
COOKIE_MAX_AGE_SECONDS = 365 * 24 * 3600
# What each language is called in itself, for the toggle.
AUTONYMS: dict[str, str] = {"en": "English", "zh": "中文"}
HTML_LANG: dict[str, str] = {"en": "en", "zh": "zh-Hans"}
_BABEL_LOCALE: dict[str, str] = {"en": "en_US", "zh": "zh_Hans_CN"}

GiB = 1 << 30
Gettext = Callable[[str], str]
TB = 10**12


@cache
def translations(lang: str) -> gettext.NullTranslations:
    """The catalog of `lang`, compiled from its `.po` once per process (no build step)."""
    if lang == DEFAULT_LANGUAGE:
        return gettext.NullTranslations()
    po_path = locale_dir() / lang / "LC_MESSAGES" / "messages.po"
    with po_path.open("rb") as po_file:
        catalog = read_po(po_file, locale=_BABEL_LOCALE[lang])
    mo = BytesIO()
    write_mo(mo, catalog, use_fuzzy=False)
    mo.seek(0)
    return Translations(fp=mo)


def _accept_language(header: str) -> list[str]:
    """Language tags of an `Accept-Language` header, best first (RFC 9110 §12.5.4)."""
    weighted: list[tuple[float, int, str]] = []
    for position, item in enumerate(header.split(",")[:32]):
        tag, _, params = item.strip().partition(";")
        quality = 1.0
        params = params.strip()
        if params.startswith("q="):
            try:
                quality = float(params[2:])
            except ValueError:
                quality = 0.0
        if tag and quality > 0:
            weighted.append((-quality, position, tag.strip().lower()))
    return [tag for _, _, tag in sorted(weighted)]


def negotiate(cookie: str | None, accept_language: str | None) -> str:
    """The toggle's cookie wins; then the browser's preference; then English."""
    if cookie in LANGUAGES:
        return cookie
    for tag in _accept_language(accept_language or ""):
        primary = tag.split("-")[0]
        if primary in LANGUAGES:
            return primary
    return DEFAULT_LANGUAGE


# Fixed-point digits a page number may show; larger magnitudes print as 1.23E30.
_SCIENTIFIC_FROM = 1e15


@dataclass(frozen=True, slots=True)
class Numbers:
    """Numbers as the page prints them: grouped per locale, units always labelled."""

    lang: str

    def _dec(self, value: float, pattern: str) -> str:
        """Grouped decimal; scientific from 10^15 up, where babel's fixed-point rounding
        needs more than the 28 digits of decimal's context (InvalidOperation: tiny
        bandwidths give decode times of 10^30 ms), and a dash for a non-finite value."""
        if not math.isfinite(value):
            return "—"
        if abs(value) >= _SCIENTIFIC_FROM:
            return format_scientific(value, format="0.00E0", locale=_BABEL_LOCALE[self.lang])
        return format_decimal(value, format=pattern, locale=_BABEL_LOCALE[self.lang])

    def num(self, value: int) -> str:
        return self._dec(value, "#,##0")

    def dec(self, value: float, digits: int = 2) -> str:
        return self._dec(value, "#,##0." + "0" * digits) if digits else self.num(round(value))

    def gib(self, n_bytes: float, digits: int = 2) -> str:
        """GiB (2^30 B), e.g. `48.00 GiB`."""
        return f"{self.dec(n_bytes / GiB, digits)} GiB"

    def gib_short(self, n_bytes: float) -> str:
        """`48 GiB` when whole, else two decimals."""
        value = n_bytes / GiB
        return f"{self.num(round(value))} GiB" if value == round(value) else self.gib(n_bytes)

    def bytes(self, n_bytes: float) -> str:
        """Largest binary unit that keeps the number ≥ 1: `128 KiB`, `1.00 GiB`."""
        for unit, size in (("GiB", GiB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if n_bytes >= size:
                value = n_bytes / size
                shown = self.num(round(value)) if value == round(value) else self.dec(value)
                return f"{shown} {unit}"
        return f"{self.num(round(n_bytes))} B"

    def tbps(self, bytes_per_s: float) -> str:
        """Decimal TB/s (10^12 B/s), about three significant figures; GB/s (10^9 B/s) below
        0.1 TB/s, so a CPU's 7.5 GB/s does not print as `0.01 TB/s`."""
        value = bytes_per_s / TB
        unit = "TB/s"
        if value < 0.1:
            value, unit = bytes_per_s / 1e9, "GB/s"
        digits = 2 if value < 10 else 1 if value < 100 else 0
        return f"{self.dec(value, digits)} {unit}"

    def ms(self, seconds: float) -> str:
        value = seconds * 1e3
        digits = 3 if value < 1 else 2 if value < 100 else 1
        return f"{self.dec(value, digits)} ms"

    def ratio(self, value: float, digits: int = 2) -> str:
        return self.dec(value, digits)


# English strings the core passes as note params: translated like messages where they occur.
NOTE_PARAM_MSGIDS: tuple[str, ...] = (
    ", its default",
    # An error's stand-in where the config names no model_type or quant_algo.
    "this model",
    "missing",
)


@dataclass(frozen=True, slots=True)
class ShownNote:
    """A note as the page shows it: `lang` is None when it is in the page's language, else the
    language it is shown in (an untranslated note, or one whose text is data, stays English)."""

    code: str
    text: str
    lang: str | None
    quote: str | None = None  # an engine's own words, shown as printed (English) after `text`


def _is_data(template: str) -> bool:
    """A template that is only parameters (a catalog entry's own remark, a reason followed by
    its hint) has no words of its own to translate."""
    parts = list(string.Formatter().parse(template))
    has_field = any(f is not None for _, f, _, _ in parts)
    return has_field and not any(literal.strip() for literal, _, _, _ in parts)


def N_(message: str) -> str:
    """Marks a message for extraction, translated where it is used."""
    return message


# Phrases the core passes as params with a value inside, worded here in each language.
_DEFAULT_OF = re.compile(r"^the default of (\S+) (\S+)$")
# Which start-up check an engine's refusal comes from (planner.core.budget.terms.StartStage).
REFUSAL_STAGES: dict[str, str] = {
    "no_kv_memory": N_("no memory is left for the KV cache"),
    "max_model_len": N_("one request of max_model_len does not fit in the KV cache"),
    "init_free_memory": N_(
        "the GPU has less free memory at start-up than gpu_memory_utilization asks for"
    ),
    "unsupported_version": N_("kvplan does not model this release"),
}


def _param_text(value: str, gettext: Gettext) -> str:
    """A str param in the page's language where the catalog has it (a catalog entry's remark,
    an English phrase the core passes); ids, names and numbers stay as they are."""
    found = _DEFAULT_OF.match(value)
    if found:
        return gettext("the default of %(engine)s %(version)s") % {
            "engine": found[1],
            "version": found[2],
        }
    return gettext(value) if value.strip() else value


def _translate(template: str, params: Mapping[str, Any], gettext: Gettext) -> str | None:
    """`template` with `params` in the catalog's language; None where the catalog has no
    translation (the caller shows the English, marked as such)."""
    translated = template if _is_data(template) else gettext(template)
    if translated == template and not _is_data(template):
        return None
    shown: dict[str, Any] = {}
    changed = False
    for k, v in params.items():
        if isinstance(v, Message):
            inner = message_text(v, gettext)
            if inner is None:
                return None
            shown[k], changed = inner, True
        elif isinstance(v, str):
            shown[k] = _param_text(v, gettext)
            changed = changed or shown[k] != v
        else:
            shown[k] = v
    if _is_data(template) and not changed:
        return None  # data with no translation of its own: still English
    try:
        return translated.format(**shown)
    except (KeyError, IndexError, ValueError):
        # A catalog entry out of step with its template: the English text is still right.
        return None


def message_text(message: Message, gettext: Gettext) -> str | None:
    """An error message (planner.core.errors) in the catalog's language, formatted from its
    code's translated template and its own params; None where there is no translation."""
    template = ERROR_TEMPLATES.get(message.code)
    if message.code == UNCODED or template is None:
        return None
    if not template.strip("{} "):
        return None
    return _translate(template, message.params, gettext)


def show_note(item: NoteOut, lang: str) -> ShownNote:
    if lang == DEFAULT_LANGUAGE:
        return ShownNote(item.code, item.text, None)
    template = TEMPLATES.get(item.code)
    if template is None:
        return ShownNote(item.code, item.text, HTML_LANG[DEFAULT_LANGUAGE])
    gettext = translations(lang).gettext
    stage = REFUSAL_STAGES.get(str(item.params.get("stage")))
    if item.code == "engine.refuses_to_start" and stage is not None:
        # The engine's message is quoted as it prints it (searchable); the page says why.
        said = gettext("%(engine)s would not start with these settings: %(reason)s. It says:")
        refusal = said % {"engine": item.params.get("engine"), "reason": gettext(stage)}
        return ShownNote(item.code, refusal, None, str(item.params.get("error") or "") or None)
    shown = _translate(template, item.params, gettext)
    if shown is None:
        return ShownNote(item.code, item.text, HTML_LANG[DEFAULT_LANGUAGE])
    return ShownNote(item.code, shown, None)


def catalog_texts() -> list[str]:
    """The catalog's own English: each entry's remarks and refusal reasons (shown as note and
    error params), translated like messages."""
    from planner.catalog import list_models, list_refused

    out: list[str] = []
    for entry in [*list_models(), *list_refused()]:
        alias_notes = [n for alias in entry.aliases for n in alias.notes]
        for text in (*entry.notes, *alias_notes, entry.refused or ""):
            if text and text not in out:
                out.append(text)
    return out


def extract_errors(
    fileobj: object, keywords: object, comment_tags: object, options: object
) -> Iterator[tuple[int, None, str, list[str]]]:
    """Babel extractor (planner/locale/babel.cfg): every error template (planner.core.errors)
    and the catalog's remarks and refusals, as messages."""
    for template in ERROR_TEMPLATES.values():
        if not _is_data(template):
            yield 0, None, template, []
    for text in catalog_texts():
        yield 0, None, text, []


def extract_notes(
    fileobj: object, keywords: object, comment_tags: object, options: object
) -> Iterator[tuple[int, None, str, list[str]]]:
    """Babel extractor (planner/locale/babel.cfg): every note template, and the English params
    the core passes, as messages."""
    for template in TEMPLATES.values():
        if not _is_data(template):
            yield 0, None, template, []
    for text in NOTE_PARAM_MSGIDS:
        yield 0, None, text, []
