"""planner.quantities: what people type, read one way by the page and the CLI."""

from __future__ import annotations

import pytest

from planner.quantities import (
    QuantityError,
    read_duration,
    read_number,
    read_rate,
    read_size,
    read_tokens,
)

GiB = 1 << 30


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("8192", 8192),
        ("8,192", 8192),
        ("8 192", 8192),
        ("8k", 8192),
        ("8K", 8192),
        ("1M", 1 << 20),
        ("1.5k", 1536),
        ("131,072", 131072),
        (" 32k ", 32768),
    ],
)
def test_tokens(text: str, tokens: int) -> None:
    assert read_tokens(text) == tokens


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("1,5", "decimal_comma"),
        ("12,34", "decimal_comma"),
        ("8x", "unknown_unit"),
        ("1.7k", "not_whole"),
        ("abc", "not_a_number"),
        ("12,34,567", "not_a_number"),
        ("", "not_a_number"),
        ("-5", "not_a_number"),
        ("8,192,", "not_a_number"),
    ],
)
def test_tokens_refused(text: str, code: str) -> None:
    with pytest.raises(QuantityError) as info:
        read_tokens(text)
    assert info.value.code == code


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("48GiB", 48 * GiB),
        ("48 GiB", 48 * GiB),
        ("48G", 48 * GiB),
        ("48gib", 48 * GiB),
        ("80GB", 80 * 10**9),
        ("512MiB", 512 << 20),
        ("0.5", GiB // 2),
        ("48", 48 * GiB),
        ("1,024 MiB", GiB),
        ("1TiB", 1 << 40),
    ],
)
def test_sizes_with_gib_as_the_bare_unit(text: str, size: int) -> None:
    assert read_size(text, default_unit="GiB") == size


def test_a_decimal_comma_is_never_read_as_thousands() -> None:
    # "1,5" read as 15 GiB was the page's old behaviour: now it is refused, with a way out.
    with pytest.raises(QuantityError) as info:
        read_size("1,5", default_unit="GiB")
    assert info.value.code == "decimal_comma" and "1.5" in str(info.value)


def test_size_without_a_default_unit_needs_one() -> None:
    with pytest.raises(QuantityError) as info:
        read_size("48")
    assert info.value.code == "needs_unit"
    with pytest.raises(QuantityError):
        read_size("48 parsecs", default_unit="GiB")


def test_rates_and_durations() -> None:
    assert read_rate("3.35TB/s") == pytest.approx(3.35e12)
    assert read_rate("900 GB/s") == pytest.approx(9e11)
    assert read_rate("3.35", default_unit="TB/s") == pytest.approx(3.35e12)
    assert read_duration("50ms") == pytest.approx(0.05)
    assert read_duration("0.05 s") == pytest.approx(0.05)
    with pytest.raises(QuantityError) as info:
        read_duration("50")  # 50 seconds or 50 ms? refused
    assert info.value.code == "needs_unit"


def test_plain_numbers() -> None:
    assert read_number("0.92") == pytest.approx(0.92)
    assert read_number("92%") == pytest.approx(0.92)
    with pytest.raises(QuantityError):
        read_number("nan")
    with pytest.raises(QuantityError):
        read_number("1e309")
