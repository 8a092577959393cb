"""Quantities as people type them, read the same way by the page and the CLI.

Token counts (`8192`, `8,192`, `8k`; k = 1024 tokens as in "8k context"), sizes (`48GiB`,
`48 GiB`, `80GB`, `48G`; a bare K/M/G/T is binary, as `free -g` and `docker -m` read it),
bandwidths (`3.35TB/s`) and durations (`50ms`). Thousands separators are accepted only as
whole groups of three, so `1,5` is refused instead of read as 15. Errors carry a stable
`code` and the text typed, so each surface words them in its own language.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from planner.core.errors import Message

KiB = 1 << 10
GiB = 1 << 30
TB = 10**12

# Group separators people type or paste: comma, space, underscore, no-break and thin spaces.
_SEP = "[,_ \u00a0\u202f]"
_NUMBER = re.compile(
    rf"^(?P<int>[0-9]{{1,3}}(?:(?P<sep>{_SEP})[0-9]{{3}})(?:(?P=sep)[0-9]{{3}})*|[0-9]+)"
    r"(?:\.(?P<frac>[0-9]+))?$"
)
_SPLIT = re.compile(r"^\s*([0-9][0-9,_ \u00a0\u202f.]*?)\s*([A-Za-zµ/%]*)\s*$")
_MAX_CHARS = 64

SIZE_UNITS: dict[str, int] = {
    "b": 1,
    "k": KiB,
    "kib": KiB,
    "kb": 10**3,
    "m": 1 << 20,
    "mib": 1 << 20,
    "mb": 10**6,
    "g": GiB,
    "gib": GiB,
    "gb": 10**9,
    "t": 1 << 40,
    "tib": 1 << 40,
    "tb": TB,
}
TOKEN_UNITS: dict[str, int] = {"": 1, "k": 1024, "m": 1 << 20}
RATE_UNITS: dict[str, float] = {"tb/s": 1e12, "gb/s": 1e9, "tib/s": float(1 << 40)}
DURATION_UNITS: dict[str, float] = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}


@dataclass(frozen=True, slots=True)
class QuantityError(ValueError):
    """`code`: not_a_number, decimal_comma, unknown_unit, needs_unit, not_whole, too_large."""

    code: str
    text: str
    units: tuple[str, ...] = ()

    def __str__(self) -> str:
        return english(self)

    @property
    def message(self) -> Message:
        """The error as a registered message (`quantity.<code>`), for a FieldError's reason."""
        t = self.text.strip()
        return Message.of(
            {
                "not_a_number": "quantity.not_a_number",
                "decimal_comma": "quantity.decimal_comma",
                "unknown_unit": "quantity.unknown_unit",
                "needs_unit": "quantity.needs_unit",
                "not_whole": "quantity.not_whole",
                "too_large": "quantity.too_large",
            }.get(self.code, "quantity.unreadable"),
            text=t,
            units=", ".join(self.units),
            dotted=t.replace(",", "."),
        )


def english(error: QuantityError) -> str:
    """The English wording of an error (the CLI's; the page translates the codes itself)."""
    return error.message.text


def _number(text: str, raw: str) -> float:
    """The number part: digits, optional whole groups of three, optional `.fraction`."""
    match = _NUMBER.match(text)
    if match is None:
        if re.fullmatch(r"[0-9]+,[0-9]{1,2}|[0-9]+,[0-9]{4,}", text):
            raise QuantityError("decimal_comma", raw)
        raise QuantityError("not_a_number", raw)
    digits = re.sub(_SEP, "", match.group("int"))
    value = float(digits + "." + (match.group("frac") or "0"))
    if not math.isfinite(value):
        raise QuantityError("too_large", raw)
    return value


def _split(text: str) -> tuple[str, str]:
    if len(text) > _MAX_CHARS:
        raise QuantityError("too_large", text[:_MAX_CHARS])
    match = _SPLIT.match(text)
    if match is None:
        raise QuantityError("not_a_number", text)
    return match.group(1).strip(), match.group(2).lower()


def read_tokens(text: str) -> int:
    """`8192`, `8,192`, `8k` (8192), `1M` (1,048,576), `1.5k` (1536) → tokens."""
    number, unit = _split(text)
    if unit not in TOKEN_UNITS:
        raise QuantityError("unknown_unit", text, ("k", "M"))
    value = _number(number, text) * TOKEN_UNITS[unit]
    if value != int(value):
        raise QuantityError("not_whole", text)
    if value > 2**62:
        raise QuantityError("too_large", text)
    return int(value)


def read_size(text: str, default_unit: str | None = None) -> int:
    """Bytes from `48GiB`, `48 GiB`, `80GB`, `48G` (= GiB); a bare number takes `default_unit`
    (None: refused, naming the units)."""
    number, unit = _split(text)
    unit = unit or (default_unit or "").lower()
    if not unit:
        raise QuantityError("needs_unit", text, ("GiB", "GB", "MiB"))
    if unit not in SIZE_UNITS:
        raise QuantityError("unknown_unit", text, ("GiB", "GB", "MiB", "MB", "TiB", "TB", "G"))
    value = _number(number, text) * SIZE_UNITS[unit]
    if value > 2**62:
        raise QuantityError("too_large", text)
    return round(value)


def read_rate(text: str, default_unit: str | None = None) -> float:
    """Bytes per second from `3.35TB/s`, `900 GB/s`; a bare number takes `default_unit`."""
    number, unit = _split(text)
    unit = unit or (default_unit or "").lower()
    if not unit:
        raise QuantityError("needs_unit", text, ("TB/s", "GB/s"))
    if unit not in RATE_UNITS:
        raise QuantityError("unknown_unit", text, ("TB/s", "GB/s"))
    return _number(number, text) * RATE_UNITS[unit]


def read_duration(text: str) -> float:
    """Seconds from `50ms`, `0.05s`; a bare number is refused (50 what?)."""
    number, unit = _split(text)
    if not unit:
        raise QuantityError("needs_unit", text, ("ms", "s"))
    if unit not in DURATION_UNITS:
        raise QuantityError("unknown_unit", text, ("ms", "s", "us"))
    return _number(number, text) * DURATION_UNITS[unit]


def read_number(text: str) -> float:
    """A plain decimal (`0.92`, `1,024`); `92%` is 0.92."""
    number, unit = _split(text)
    if unit not in ("", "%"):
        raise QuantityError("unknown_unit", text, ("%",))
    value = _number(number, text)
    return value / 100 if unit == "%" else value
