"""Units: KV dtypes and their sizes, binary vs decimal prefixes, parsing and formatting.

GiB is 2**30 bytes; GB and TB/s are decimal (10**9, 10**12), as the seeds insist. Sizes are
integers of bytes; a dtype's width is kept in *bits* so 4-bit caches stay integral.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from planner.core.errors import FieldError

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40
KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12


@dataclass(frozen=True, slots=True)
class KVDtype:
    """How one cached K or V element is stored."""

    name: str
    bits: int
    # fp32 scale bytes per (token, kv head) for K and V together; 0 for per-tensor scales.
    scale_bytes_per_token_head: int = 0
    note_code: str = ""  # a planner.core.notes code explaining this dtype, if any

    @property
    def bytes_per_element(self) -> float:
        return self.bits / 8

    def bytes_for(self, elements: int) -> int:
        """Bytes for `elements` elements, rounded up to a whole byte."""
        return -(-elements * self.bits // 8)


# vLLM's CacheDType strings plus the plain torch names. fp8 variants use a per-tensor scale
# (no page overhead); the *_per_token_head modes add 2 fp32 scales per token per KV head.
_DTYPES: dict[str, KVDtype] = {
    d.name: d
    for d in (
        KVDtype("fp32", 32),
        KVDtype("fp16", 16),
        KVDtype("bf16", 16),
        KVDtype("fp8", 8, note_code="kv_dtype.fp8"),
        KVDtype("fp8_e4m3", 8),
        KVDtype("fp8_e5m2", 8),
        KVDtype("fp8_inc", 8),
        KVDtype("int8", 8, note_code="kv_dtype.int8"),
        KVDtype("int8_per_token_head", 8, scale_bytes_per_token_head=8),
        KVDtype("fp8_per_token_head", 8, scale_bytes_per_token_head=8),
        # int4: a fp32 scale per token and KV head for K and for V (TensorRT-LLM/LMDeploy-style).
        KVDtype("int4", 4, scale_bytes_per_token_head=8, note_code="kv_dtype.int4"),
    )
}

_ALIASES = {
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
}

DTYPE_NAMES: tuple[str, ...] = ("auto", *_DTYPES)


def kv_dtype(name: str, *, field: str = "kv_cache_dtype") -> KVDtype:
    """Look a dtype up by vLLM/torch name; raise a FieldError listing what works."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _DTYPES:
        raise FieldError(field, "input.unknown_dtype", name=name, names=", ".join(DTYPE_NAMES))
    return _DTYPES[key]


_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_RATE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]i?B)/s\s*$", re.IGNORECASE)
_FACTORS = {
    "b": 1,
    "kb": KB,
    "mb": MB,
    "gb": GB,
    "tb": TB,
    "kib": KiB,
    "mib": MiB,
    "gib": GiB,
    "tib": TiB,
}


def parse_bytes(text: str, *, field: str = "size") -> int:
    """ "48GiB" -> 51539607552, "80 GB" -> 80e9, "1024" -> 1024 bytes."""
    m = _SIZE_RE.match(text)
    if not m:
        raise FieldError(field, "input.size_unreadable", text=text)
    value = float(m.group(1)) * _FACTORS[(m.group(2) or "B").lower()]
    if not math.isfinite(value) or value > 2**62:
        raise FieldError(field, "input.size_too_large", text=text)
    return round(value)


def parse_rate(text: str, *, field: str = "bandwidth") -> float:
    """ "1.5TB/s" -> 1.5e12 bytes per second."""
    m = _RATE_RE.match(text)
    if not m:
        raise FieldError(field, "input.bandwidth_unreadable", text=text)
    return float(m.group(1)) * _FACTORS[m.group(2).lower()]


def fmt_gib(n_bytes: float, digits: int = 3) -> str:
    return f"{n_bytes / GiB:.{digits}f} GiB"


def fmt_bytes(n_bytes: int) -> str:
    """Largest binary unit that keeps the number >= 1, e.g. 131072 -> '128 KiB'."""
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n_bytes >= size:
            value = n_bytes / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.3f} {unit}"
    return f"{n_bytes} B"


def fmt_tbps(bytes_per_s: float) -> str:
    return f"{bytes_per_s / TB:.3g} TB/s"
