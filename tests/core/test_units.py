from __future__ import annotations

import pytest

from planner.core.errors import FieldError
from planner.core.units import GiB, fmt_bytes, kv_dtype, parse_bytes, parse_rate


def test_gib_is_binary_and_tb_decimal() -> None:
    assert parse_bytes("48GiB") == 48 * 2**30
    assert parse_bytes("80 GB") == 80 * 10**9
    assert parse_rate("1.5TB/s") == 1.5e12
    assert fmt_bytes(131072) == "128 KiB"
    assert fmt_bytes(GiB) == "1 GiB"


def test_dtype_sizes_and_scales() -> None:
    assert kv_dtype("bf16").bits == 16 and kv_dtype("bfloat16").bits == 16
    assert kv_dtype("fp8").bytes_per_element == 1.0
    assert kv_dtype("fp8_e5m2").scale_bytes_per_token_head == 0  # per-tensor scale
    assert kv_dtype("int8_per_token_head").scale_bytes_per_token_head == 8  # 2 fp32 scales
    assert kv_dtype("int4").bytes_for(3) == 2  # 12 bits round up to 2 bytes


@pytest.mark.parametrize("text", ["48 parsecs", "", "1e999GiB", "-1GiB"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(FieldError):
        parse_bytes(text)


def test_unknown_dtype_lists_the_good_ones() -> None:
    with pytest.raises(FieldError, match="fp8_e4m3"):
        kv_dtype("fp7")
