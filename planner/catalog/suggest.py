""" "Did you mean": the catalog ids and aliases closest to a model id that is not in it, found
offline (no Hub call): the same name in another case or with other separators (`llama3.1-8b`
for meta-llama/Llama-3.1-8B), then near spellings by edit distance.

`likely_typo` is stricter: the one id a typed id is a misspelling of, in the same org, with
every digit and separator kept and only letters of a long word changed (`Instrct`), so a
real repo that differs in a size, a version or a short tag (`-pt` / `-it`) is never taken for
one. Front ends refuse such an id before asking the Hub.
"""

from __future__ import annotations

import difflib
import re
from functools import cache

_SEPARATORS = re.compile(r"[-_. ]+")
_PREFIXES = ("https://huggingface.co/", "http://huggingface.co/", "hf://", "huggingface.co/")


def _squash(text: str) -> str:
    return _SEPARATORS.sub("", text.lower())


def _clean(text: str) -> str:
    key = text.strip()
    for prefix in _PREFIXES:
        if key.lower().startswith(prefix):
            key = key[len(prefix) :]
            break
    return key.strip("/")


@cache
def _ids() -> tuple[str, ...]:
    from planner.catalog import list_models, list_refused

    out: list[str] = []
    for entry in [*list_models(), *list_refused()]:
        out += [entry.id, *(a.id for a in entry.aliases)]
    return tuple(out)


def _osa(a: str, b: str) -> int:
    """Edit distance with adjacent transpositions (optimal string alignment)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                row[j] = min(row[j], prev2[j - 2] + 1)
        prev2, prev = prev, row
    return prev[-1]


def suggest_models(text: str, limit: int = 5) -> list[str]:
    """Catalog ids and aliases close to `text`, closest first (empty when none is close)."""
    typed = _clean(text)
    org, _, name = typed.rpartition("/")
    ids = _ids()
    same = [i for i in ids if _squash(i) == _squash(typed)]
    same += [i for i in ids if _squash(i.rsplit("/", 1)[-1]) == _squash(name) and i not in same]
    by_name = {i.rsplit("/", 1)[-1].lower(): i for i in ids}
    pool = {i.lower(): i for i in ids} if org else by_name
    near = difflib.get_close_matches(typed.lower() if org else name.lower(), pool, 8, 0.8)
    if org:
        near += difflib.get_close_matches(name.lower(), by_name, 8, 0.8)
    out = list(dict.fromkeys([*same, *(pool.get(k) or by_name[k] for k in near)]))
    return out[:limit]


def likely_typo(text: str) -> str | None:
    """The catalog id `text` misspells (see the module doc), or None."""
    typed = _clean(text)
    org, _, name = typed.rpartition("/")
    hits: list[str] = []
    for cand in _ids():
        c_org, _, c_name = cand.rpartition("/")
        if org and org.lower() != c_org.lower():
            continue
        if _squash(c_name) == _squash(name):
            hits.append(cand)
            continue
        if not org:
            continue
        words, c_words = _SEPARATORS.split(name.lower()), _SEPARATORS.split(c_name.lower())
        if len(words) != len(c_words):
            continue
        diff = [(w, c) for w, c in zip(words, c_words, strict=True) if w != c]
        if len(diff) == 1:
            w, c = diff[0]
            letters = w.isalpha() and c.isalpha() and min(len(w), len(c)) >= 4
            if letters and _osa(w, c) <= 2:
                hits.append(cand)
    return hits[0] if len(set(hits)) == 1 else None


__all__ = ["likely_typo", "suggest_models"]
