"""The generic machinery of log reading: cleaning a line, the bounded patterns, rules and facts.

Every line is cleaned (ANSI colours, carriage returns), cut to `MAX_LINE_CHARS`, and matched in
two steps: a literal marker is found with `str.find` (linear), then a small regex is matched *at*
that position (`re.match` with `pos`): anchored, no nested quantifiers, bounded repetitions. So
the whole parse is linear in the input size, whatever it holds.

Each engine's own rules live with the engine (`planner.core.engines.*.logs`); this module knows
no engine, so the engines can import it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

MAX_LOG_BYTES = 2 << 20
MAX_LOG_LINES = 20_000
MAX_LINE_CHARS = 8192

# Integers with or without thousands separators ("42,656", "367404"); decimals; signed decimals.
INT = r"([0-9]{1,3}(?:,[0-9]{3})+|[0-9]{1,15})"
NUM = r"([0-9]{1,12}(?:\.[0-9]{1,12})?)"
SNUM = r"(-?[0-9]{1,12}(?:\.[0-9]{1,12})?)"

_ANSI = re.compile(r"\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]|#033\[[0-9;]{0,32}m")
_SOURCE = re.compile(r"[A-Za-z_]{0,32}(?:TP|DP|PP|EP)[0-9]{1,5}|RANK [0-9]{1,5}|pid=[0-9]{1,10}")
# Argument dumps: Python dict reprs ('key': value) and key=value lists.
KV_PY = re.compile(
    r"'([A-Za-z_][A-Za-z0-9_]{0,63})':\s{0,4}('[^']{0,256}'|\"[^\"]{0,256}\"|-?[0-9][0-9.eE+-]{0,30}|True|False|None)"
)
KV_EQ = re.compile(r"\b([a-z_][a-z0-9_]{0,63})=('[^']{0,256}'|[^,\s()]{1,64})")
_P_VERSION = re.compile(r"[\s:=]{0,4}v?([0-9]{1,3}\.[0-9]{1,4}[0-9A-Za-z.+\-]{0,40})")

P_NUM = re.compile(r"\s{0,4}" + NUM)
P_SNUM = re.compile(r"\s{0,4}" + SNUM)
P_INT = re.compile(r"\s{0,4}" + INT)
P_NUM_GIB = re.compile(r"\s{0,4}" + NUM + r"\s{0,4}GiB")
P_PAREN_INT = re.compile(r"\s{0,4}\(" + INT + r"\)")
P_PAREN_NUM_GIB = re.compile(r"\s{0,4}\(" + NUM + r"\s{0,4}GiB\)")
P_WORD = re.compile(r"\s{0,4}([A-Za-z0-9_.]{1,40})")

# Keys taken from argument dumps; everything else (api keys, paths, tokens) is never kept.
PLANNING_KEYS = frozenset(
    {
        "model",
        "model_path",
        "served_model_name",
        "tensor_parallel_size",
        "tp_size",
        "pipeline_parallel_size",
        "pp_size",
        "data_parallel_size",
        "dp_size",
        "max_model_len",
        "max_seq_len",
        "context_length",
        "context_len",
        "gpu_memory_utilization",
        "mem_fraction_static",
        "free_gpu_memory_fraction",
        "kv_cache_free_gpu_memory_fraction",
        "kv_cache_dtype",
        "block_size",
        "page_size",
        "tokens_per_block",
        "max_num_seqs",
        "max_num_batched_tokens",
        "max_running_requests",
        "max_total_num_tokens",
        "max_num_requests",
        "max_num_tokens",
        "max_batch_size",
        "chunked_prefill_size",
        "max_prefill_tokens",
        "enable_prefix_caching",
        "quantization",
        "dtype",
        "disable_hybrid_kv_cache_manager",
        "swap_space",
        "num_gpu_blocks_override",
        "kv_cache_memory_bytes",
        "available_gpu_mem",
        # SGLang's pool flags (engines/sglang/logs.py LOGGED_FLAGS).
        "swa_full_tokens_ratio",
        "mamba_full_memory_ratio",
        "max_mamba_cache_size",
        "mamba_ssm_dtype",
    }
)


@dataclass(frozen=True, slots=True)
class Fact:
    """One recognised line: what it states (`values`, as printed) and where it came from."""

    engine: str
    kind: str
    values: Mapping[str, str]
    line_no: int
    source: str | None
    text: str


@dataclass(frozen=True, slots=True)
class ParsedLog:
    facts: tuple[Fact, ...]
    lines_read: int
    lines_truncated: int
    args: Mapping[str, str] = field(default_factory=dict)  # planning keys from argument dumps
    args_source: Mapping[str, int] = field(default_factory=dict)  # key -> line number
    version: str | None = None
    tie_engine: str | None = None  # wins a tie of line counts (the registry's default engine)

    def of(self, kind: str) -> list[Fact]:
        return [f for f in self.facts if f.kind == kind]

    def first(self, kind: str) -> Fact | None:
        for f in self.facts:
            if f.kind == kind:
                return f
        return None

    def engine_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for f in self.facts:
            counts[f.engine] = counts.get(f.engine, 0) + 1
        return counts

    @property
    def detected_engine(self) -> str | None:
        counts = self.engine_counts()
        if not counts:
            return None
        return max(counts, key=lambda e: (counts[e], e == self.tie_engine))


# ---------------------------------------------------------------------------------------------
# Numbers as printed


def to_int(text: str) -> int:
    return int(text.replace(",", ""))


def to_float(text: str) -> float:
    return float(text.replace(",", ""))


def half_unit(text: str) -> float:
    """Half of the last printed digit: '6.51' -> 0.005, '24.0' -> 0.05, '8' -> 0.5."""
    _, _, frac = text.partition(".")
    return 0.5 * 10.0 ** -len(frac)


# ---------------------------------------------------------------------------------------------
# Line matching


def clean_line(raw: str) -> str:
    line = raw.replace("\r", "")
    if len(line) > MAX_LINE_CHARS:
        line = line[:MAX_LINE_CHARS]
    if "\x1b" in line or "#033[" in line:
        line = _ANSI.sub("", line)
    return line


def line_source(prefix: str) -> str | None:
    """The process or rank prefix (`EngineCore_DP0 pid=…`, `TP0`, `RANK 0`) before a marker."""
    found = _SOURCE.findall(prefix[-256:])
    return " ".join(found) if found else None


def after(line: str, low: str, label: str, pattern: re.Pattern[str], start: int = 0) -> str | None:
    """The first group of `pattern` matched right after `label` (lower-case), else None."""
    at = low.find(label, start)
    if at < 0:
        return None
    m = pattern.match(line, at + len(label))
    return m.group(1) if m else None


Spec = Sequence[tuple[str, str, re.Pattern[str]]]  # (value key, lower-case label, pattern)


def labels(line: str, low: str, start: int, spec: Spec) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, label, pattern in spec:
        value = after(line, low, label, pattern, start)
        if value is not None:
            out[key] = value
    return out


Matcher = Callable[[str, str, int], dict[str, str] | None]


@dataclass(frozen=True, slots=True)
class Rule:
    """One kind of line an engine prints; the engine that lists it owns its facts."""

    kind: str
    marker: str  # lower-case literal that must occur in the line
    match: Matcher  # (line, lower-case line, marker position) -> values or None
    echo: bool = True


def re_at(pattern: str, names: tuple[str, ...], back: str | None = None) -> Matcher:
    """Match `pattern` at the marker (or at the last `back` literal before it)."""
    rx = re.compile(pattern, re.IGNORECASE)

    def run(line: str, low: str, pos: int) -> dict[str, str] | None:
        start = pos
        if back is not None:
            start = low.rfind(back, max(0, pos - 200), pos)
            if start < 0:
                return None
        m = rx.match(line, start)
        if not m:
            return None
        return {n: g for n, g in zip(names, m.groups(), strict=True) if g is not None}

    return run


def labelled(spec: Spec, required: tuple[str, ...], *, whole_line: bool = False) -> Matcher:
    """The labelled values found after the marker (or anywhere in the line); None unless every
    `required` key is among them."""

    def run(line: str, low: str, pos: int) -> dict[str, str] | None:
        out = labels(line, low, 0 if whole_line else pos, spec)
        return out if all(k in out for k in required) else None

    return run


def pairs(rx: re.Pattern[str]) -> Matcher:
    """The planning keys of an argument dump (first occurrence of each)."""

    def run(line: str, low: str, pos: int) -> dict[str, str] | None:
        out: dict[str, str] = {}
        for m in rx.finditer(line):
            key, value = m.group(1), m.group(2)
            if key in PLANNING_KEYS and key not in out:
                out[key] = value.strip("'\"")
        return out

    return run


def read_version(line: str, low: str, markers: Sequence[str]) -> str | None:
    """The release printed after the first of `markers` (lower-case) found in the line."""
    for marker in markers:
        value = after(line, low, marker, _P_VERSION)
        if value is not None:
            return value
    return None


__all__ = [
    "INT",
    "KV_EQ",
    "KV_PY",
    "MAX_LINE_CHARS",
    "MAX_LOG_BYTES",
    "MAX_LOG_LINES",
    "NUM",
    "PLANNING_KEYS",
    "P_INT",
    "P_NUM",
    "P_NUM_GIB",
    "P_PAREN_INT",
    "P_PAREN_NUM_GIB",
    "P_SNUM",
    "P_WORD",
    "SNUM",
    "Fact",
    "Matcher",
    "ParsedLog",
    "Rule",
    "Spec",
    "after",
    "clean_line",
    "half_unit",
    "labelled",
    "labels",
    "line_source",
    "pairs",
    "re_at",
    "read_version",
    "to_float",
    "to_int",
]
