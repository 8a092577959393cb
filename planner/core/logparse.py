"""Read the KV-cache lines an engine prints at start-up: vLLM (v0 and v1), SGLang, TensorRT-LLM.

The log is untrusted text. Every line is cleaned (ANSI colours, carriage returns), cut to
`MAX_LINE_CHARS`, and matched in two steps: a literal marker is found with `str.find` (linear),
then a small regex is matched *at* that position (`re.match` with `pos`): anchored, no nested
quantifiers, bounded repetitions. So the whole parse is linear in the input size, whatever it
holds. Timestamps, process prefixes (`(EngineCore_DP0 pid=…)`, `[… TP0]`, `[RANK 0]`), thousands
separators and unknown lines are tolerated; several ranks may print the same figure.

Numbers are kept as the text the engine printed, so a reconciler knows their display precision.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from planner.core.engines import DEFAULT_ENGINE, engine_labels, log_engines
from planner.core.errors import FieldError

MAX_LOG_BYTES = 2 << 20
MAX_LOG_LINES = 20_000
MAX_LINE_CHARS = 8192
_TEXT_CHARS = 300  # of a recognised line, echoed back (never the args lines: they may hold keys)

ENGINE_LABELS = {name: label for name, label in engine_labels().items() if name in log_engines()}

# Integers with or without thousands separators ("42,656", "367404"); decimals; signed decimals.
_INT = r"([0-9]{1,3}(?:,[0-9]{3})+|[0-9]{1,15})"
_NUM = r"([0-9]{1,12}(?:\.[0-9]{1,12})?)"
_SNUM = r"(-?[0-9]{1,12}(?:\.[0-9]{1,12})?)"

_ANSI = re.compile(r"\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]|#033\[[0-9;]{0,32}m")
_SOURCE = re.compile(r"[A-Za-z_]{0,32}(?:TP|DP|PP|EP)[0-9]{1,5}|RANK [0-9]{1,5}|pid=[0-9]{1,10}")
_KV_PY = re.compile(
    r"'([A-Za-z_][A-Za-z0-9_]{0,63})':\s{0,4}('[^']{0,256}'|\"[^\"]{0,256}\"|-?[0-9][0-9.eE+-]{0,30}|True|False|None)"
)
_KV_EQ = re.compile(r"\b([a-z_][a-z0-9_]{0,63})=('[^']{0,256}'|[^,\s()]{1,64})")
_P_VERSION = re.compile(r"[\s:=]{0,4}v?([0-9]{1,3}\.[0-9]{1,4}[0-9A-Za-z.+\-]{0,40})")

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
        return max(counts, key=lambda e: (counts[e], e == DEFAULT_ENGINE))


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


def _source(prefix: str) -> str | None:
    found = _SOURCE.findall(prefix[-256:])
    return " ".join(found) if found else None


def _after(line: str, low: str, label: str, pattern: re.Pattern[str], start: int = 0) -> str | None:
    """The first group of `pattern` matched right after `label` (lower-case), else None."""
    at = low.find(label, start)
    if at < 0:
        return None
    m = pattern.match(line, at + len(label))
    return m.group(1) if m else None


_P_NUM = re.compile(r"\s{0,4}" + _NUM)
_P_SNUM = re.compile(r"\s{0,4}" + _SNUM)
_P_INT = re.compile(r"\s{0,4}" + _INT)
_P_NUM_GIB = re.compile(r"\s{0,4}" + _NUM + r"\s{0,4}GiB")
_P_PAREN_INT = re.compile(r"\s{0,4}\(" + _INT + r"\)")
_P_PAREN_NUM_GIB = re.compile(r"\s{0,4}\(" + _NUM + r"\s{0,4}GiB\)")
_P_WORD = re.compile(r"\s{0,4}([A-Za-z0-9_.]{1,40})")


def _labels(
    line: str, low: str, start: int, spec: list[tuple[str, str, re.Pattern[str]]]
) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, label, pattern in spec:
        value = _after(line, low, label, pattern, start)
        if value is not None:
            out[key] = value
    return out


Matcher = Callable[[str, str, int], dict[str, str] | None]


@dataclass(frozen=True, slots=True)
class _Rule:
    engine: str
    kind: str
    marker: str  # lower-case literal that must occur in the line
    match: Matcher  # (line, lower-case line, marker position) -> values or None
    echo: bool = True


def _re_at(pattern: str, names: tuple[str, ...], back: str | None = None) -> Matcher:
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


def _labelled(
    spec: list[tuple[str, str, re.Pattern[str]]],
    required: tuple[str, ...],
    *,
    whole_line: bool = False,
) -> Matcher:
    def run(line: str, low: str, pos: int) -> dict[str, str] | None:
        out = _labels(line, low, 0 if whole_line else pos, spec)
        return out if all(k in out for k in required) else None

    return run


def _pairs(rx: re.Pattern[str]) -> Matcher:
    def run(line: str, low: str, pos: int) -> dict[str, str] | None:
        out: dict[str, str] = {}
        for m in rx.finditer(line):
            key, value = m.group(1), m.group(2)
            if key in PLANNING_KEYS and key not in out:
                out[key] = value.strip("'\"")
        return out

    return run


def _v0_profile(line: str, low: str, pos: int) -> dict[str, str] | None:
    """`Memory profiling results: total_gpu_memory=23.58GiB … gpu_memory_utilization=0.90`."""
    out: dict[str, str] = {}
    for key in (
        "total_gpu_memory",
        "initial_memory_usage",
        "peak_torch_memory",
        "memory_usage_post_profile",
        "non_torch_memory",
        "kv_cache_size",
        "gpu_memory_utilization",
    ):
        value = _after(line, low, key + "=", _P_NUM, pos)
        if value is not None:
            out[key] = value
    return out if "kv_cache_size" in out else None


_V1_ERROR = [
    ("max_model_len", "max seq len", _P_PAREN_INT),
    ("available_gib", "available kv cache memory", _P_PAREN_NUM_GIB),
    ("estimated_max_model_len", "estimated maximum model length is", _P_INT),
]
_NEEDED = re.compile(r"\(\s{0,4}" + _NUM + r"\s{0,4}GiB kv cache is needed", re.IGNORECASE)


def _v1_error(line: str, low: str, pos: int) -> dict[str, str] | None:
    """`To serve at least one request with the model's max seq len (N), (X GiB KV cache is
    needed, which is larger than the available KV cache memory (Y GiB). … is M.`"""
    out = _labels(line, low, 0, _V1_ERROR)
    start = low.rfind("(", max(0, pos - 40), pos)
    m = _NEEDED.match(line, start) if start >= 0 else None
    if m is None:
        return None
    out["needed_gib"] = m.group(1)
    return out


RULES: tuple[_Rule, ...] = (
    # ---- vLLM -------------------------------------------------------------------------------
    _Rule(
        "vllm",
        "available_kv",
        "available kv cache memory:",
        _re_at(r"available kv cache memory:\s{0,4}" + _NUM + r"\s{0,4}GiB", ("gib",)),
    ),
    _Rule(
        "vllm",
        "kv_tokens",
        "gpu kv cache size:",
        _re_at(r"gpu kv cache size:\s{0,4}" + _INT + r"\s{0,4}tokens", ("tokens",)),
    ),
    _Rule(
        "vllm",
        "max_concurrency",
        "maximum concurrency for",
        _re_at(
            r"maximum concurrency for\s{0,4}"
            + _INT
            + r"\s{0,4}tokens per request:\s{0,4}"
            + _NUM
            + r"\s{0,2}x",
            ("context_tokens", "x"),
        ),
    ),
    _Rule(
        "vllm",
        "num_blocks",
        "gpu blocks:",
        _re_at(
            r"gpu blocks:\s{0,4}" + _INT + r"(?:,\s{0,4}#?\s{0,4}cpu blocks:\s{0,4}" + _INT + ")?",
            ("gpu_blocks", "cpu_blocks"),
        ),
    ),
    _Rule(
        "vllm",
        "num_blocks",
        "cuda blocks:",
        _re_at(
            r"cuda blocks:\s{0,4}" + _INT + r"(?:,\s{0,4}#?\s{0,4}cpu blocks:\s{0,4}" + _INT + ")?",
            ("gpu_blocks", "cpu_blocks"),
        ),
    ),
    _Rule(
        "vllm",
        "weights",
        "model loading took",
        _re_at(r"model loading took\s{0,4}" + _NUM + r"\s{0,4}(GiB|GB)", ("gib", "unit")),
    ),
    _Rule(
        "vllm",
        "weights",
        "loading model weights took",
        _re_at(r"loading model weights took\s{0,4}" + _NUM + r"\s{0,4}(GiB|GB)", ("gib", "unit")),
    ),
    _Rule("vllm", "v0_profile", "memory profiling results:", _v0_profile),
    _Rule(
        "vllm",
        "v0_instance_memory",
        "the current vllm instance can use total_gpu_memory",
        _re_at(
            r"the current vllm instance can use total_gpu_memory\s{0,4}\(\s{0,4}"
            + _NUM
            + r"\s{0,4}GiB\)\s{0,4}x gpu_memory_utilization\s{0,4}\(\s{0,4}"
            + _NUM
            + r"\)\s{0,4}=\s{0,4}"
            + _NUM,
            ("total_gib", "utilization", "requested_gib"),
        ),
    ),
    _Rule(
        "vllm",
        "v0_breakdown",
        "model weights take",
        _labelled(
            [
                ("weights_gib", "model weights take", _P_NUM_GIB),
                ("non_torch_gib", "non_torch_memory takes", _P_NUM_GIB),
                ("activation_gib", "pytorch activation peak memory takes", _P_NUM_GIB),
                ("kv_gib", "reserved for kv cache is", _P_NUM_GIB),
            ],
            ("kv_gib",),
        ),
    ),
    _Rule(
        "vllm",
        "v1_profile",
        "total non kv cache memory:",
        _labelled(
            [
                ("non_kv_gib", "total non kv cache memory:", _P_NUM_GIB),
                ("activation_gib", "torch peak memory increase:", _P_NUM_GIB),
                ("non_torch_gib", "non-torch forward increase memory:", _P_NUM_GIB),
                ("weights_gib", "weights memory:", _P_NUM_GIB),
            ],
            ("non_kv_gib",),
        ),
    ),
    _Rule(
        "vllm",
        "requested_memory",
        "requested memory:",
        _re_at(r"requested memory:\s{0,4}" + _NUM + r"\s{0,4}GiB", ("gib",)),
    ),
    _Rule(
        "vllm",
        "cuda_graph",
        "graph capturing finished in",
        _re_at(
            r"graph capturing finished in\s{0,4}[0-9]{1,6}\s{0,4}secs?,\s{0,4}took\s{0,4}"
            + _SNUM
            + r"\s{0,4}GiB",
            ("gib",),
        ),
    ),
    _Rule(
        "vllm",
        "padding",
        "padding layers, may waste at most",
        _re_at(
            r"add\s{1,4}" + _INT + r"\s{1,4}padding layers, may waste at most\s{0,4}" + _NUM + "%",
            ("layers", "pct"),
            back="add ",
        ),
    ),
    _Rule(
        "vllm",
        "v1_error",
        "gib kv cache is needed",
        _v1_error,
    ),
    _Rule(
        "vllm",
        "v0_error",
        "maximum number of tokens that can be stored in kv cache",
        _labelled(
            [
                ("max_model_len", "max seq len", _P_PAREN_INT),
                ("max_tokens", "stored in kv cache", _P_PAREN_INT),
            ],
            ("max_tokens",),
            whole_line=True,
        ),
    ),
    _Rule("vllm", "args", "non-default args:", _pairs(_KV_PY), echo=False),
    _Rule("vllm", "args", "with config:", _pairs(_KV_EQ), echo=False),
    # ---- SGLang -----------------------------------------------------------------------------
    _Rule(
        "sglang",
        "load_begin",
        "load weight begin.",
        _labelled([("avail_gb", "avail mem=", _P_NUM)], ("avail_gb",)),
    ),
    _Rule(
        "sglang",
        "load_end",
        "load weight end.",
        _labelled(
            [
                ("avail_gb", "avail mem=", _P_NUM),
                ("usage_gb", "mem usage=", _P_NUM),
                ("dtype", "dtype=", _P_WORD),
            ],
            ("avail_gb",),
        ),
    ),
    _Rule(
        "sglang",
        "kv_allocated",
        "kv cache is allocated.",
        _labelled(
            [
                ("tokens", "#tokens:", _P_INT),
                ("k_gb", ", k size:", _P_NUM),
                ("v_gb", ", v size:", _P_NUM),
                ("kv_gb", ", kv size:", _P_NUM),
                ("dtype", "dtype:", _P_WORD),
            ],
            ("tokens",),
        ),
    ),
    _Rule(
        "sglang",
        "pool_end",
        "memory pool end.",
        _labelled([("avail_gb", "avail mem=", _P_NUM)], ("avail_gb",)),
    ),
    _Rule(
        "sglang",
        "max_total_tokens",
        "max_total_num_tokens=",
        _labelled(
            [
                ("tokens", "max_total_num_tokens=", _P_INT),
                ("max_running_requests", "max_running_requests=", _P_INT),
                ("context_len", "context_len=", _P_INT),
                ("available_gpu_mem_gb", "available_gpu_mem=", _P_NUM),
            ],
            ("tokens",),
        ),
    ),
    _Rule("sglang", "args", "serverargs(", _pairs(_KV_EQ), echo=False),
    # ---- TensorRT-LLM -----------------------------------------------------------------------
    _Rule(
        "trtllm",
        "free_memory",
        "memory usage when calculating max tokens in paged kv cache:",
        _labelled(
            [("total_gib", "total:", _P_NUM_GIB), ("available_gib", "available:", _P_NUM_GIB)],
            ("available_gib",),
        ),
    ),
    _Rule(
        "trtllm",
        "primary_blocks",
        "number of blocks in kv cache primary pool:",
        _re_at(r"number of blocks in kv cache primary pool:\s{0,4}" + _INT, ("blocks",)),
    ),
    _Rule(
        "trtllm",
        "secondary_blocks",
        "number of blocks in kv cache secondary pool:",
        _re_at(r"number of blocks in kv cache secondary pool:\s{0,4}" + _INT, ("blocks",)),
    ),
    _Rule(
        "trtllm",
        "tokens_per_block",
        "number of tokens per block:",
        _re_at(r"number of tokens per block:\s{0,4}" + _INT, ("tokens",)),
    ),
    _Rule(
        "trtllm",
        "allocated",
        "for max tokens",
        _re_at(
            r"allocated\s{0,4}"
            + _NUM
            + r"\s{0,4}GiB for max tokens(?: in paged kv cache)?\s{0,4}\(\s{0,4}"
            + _INT
            + r"\s{0,4}\)",
            ("gib", "tokens"),
            back="allocated",
        ),
    ),
    _Rule(
        "trtllm",
        "using_tokens",
        " tokens in paged kv cache",
        _re_at(r"using\s{1,4}" + _INT + r"\s{1,4}tokens in paged kv cache", ("tokens",), "using"),
    ),
    _Rule(
        "trtllm",
        "profile",
        "peak memory during memory usage profiling",
        _labelled(
            [
                ("peak_gib", "(torch + non-torch):", _P_NUM_GIB),
                (
                    "available_gib",
                    "available kv cache memory when calculating max tokens:",
                    _P_NUM_GIB,
                ),
                ("fraction", "fraction is set", _P_NUM),
                ("kv_bytes_per_token", "kv size is", _P_INT),
                ("kv_bytes_per_token", "kv size per token is", _P_INT),
                ("total_gib", "device total memory", _P_NUM_GIB),
            ],
            ("available_gib",),
        ),
    ),
    _Rule(
        "trtllm",
        "weights",
        "memory used after loading model weights (inside torch)",
        _labelled(
            [("gib", "in memory usage profiling:", _P_NUM_GIB)],
            ("gib",),
        ),
    ),
    _Rule("trtllm", "args", "max_num_requests=", _pairs(_KV_EQ), echo=False),
)

# Engine hints in lines no rule recognises (used only to name the engine of a foreign log).
_HINTS = (
    ("trtllm", "[tensorrt-llm]"),
    ("trtllm", "[trt-llm]"),
    ("sglang", "sglang"),
    ("vllm", "vllm"),
    ("vllm", "enginecore"),
)


_VERSION_MARKERS = ("vllm api server version", "llm engine (", "vllm version", "sglang version")


def _version(line: str, low: str) -> str | None:
    for marker in _VERSION_MARKERS:
        value = _after(line, low, marker, _P_VERSION)
        if value is not None:
            return value
    return None


def _match(line: str, low: str) -> tuple[_Rule, dict[str, str], int] | None:
    for rule in RULES:
        pos = low.find(rule.marker)
        if pos < 0:
            continue
        values = rule.match(line, low, pos)
        if values:
            return rule, values, pos
    return None


def check_text(text: str) -> None:
    """Reject input that is not a text log: empty, binary, or over the size bounds."""
    if len(text) > MAX_LOG_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_LOG_BYTES:
        raise FieldError(
            "log",
            f"the log is larger than {MAX_LOG_BYTES // (1 << 20)} MiB; paste only the start-up "
            "lines (from engine start to 'Maximum concurrency' / 'KV Cache is allocated')",
        )
    if not text.strip():
        raise FieldError(
            "log", "the log is empty; paste the engine's start-up lines (its KV-cache lines)"
        )
    sample = text[:65536]
    controls = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\t\n\r\x1b\x0c")
    if "\x00" in text or controls > max(8, len(sample) // 100):
        raise FieldError(
            "log",
            "this looks like binary data, not a text log (NUL or control bytes); paste the "
            "engine's text output",
        )


def parse_log(text: str) -> ParsedLog:
    """Every recognised line of `text` (checked with `check_text` first)."""
    check_text(text)
    lines = text.rstrip("\n").split("\n")
    if len(lines) > MAX_LOG_LINES:
        raise FieldError(
            "log",
            f"the log has {len(lines):,} lines; at most {MAX_LOG_LINES:,} are read — paste "
            "the start-up part only",
        )
    facts: list[Fact] = []
    args: dict[str, str] = {}
    args_line: dict[str, int] = {}
    version: str | None = None
    truncated = 0
    for number, raw in enumerate(lines, start=1):
        if len(raw) > MAX_LINE_CHARS:
            truncated += 1
        line = clean_line(raw)
        low = line.lower()
        if version is None:
            version = _version(line, low)
        found = _match(line, low)
        if found is None:
            continue
        rule, values, pos = found
        if rule.kind == "args":
            for key, value in values.items():
                if key not in args:
                    args[key] = value
                    args_line[key] = number
            text_out = f"{rule.marker.rstrip(':(')} … ({len(values)} planning settings read)"
        else:
            text_out = line.strip()[:_TEXT_CHARS]
        facts.append(Fact(rule.engine, rule.kind, values, number, _source(line[:pos]), text_out))
    return ParsedLog(tuple(facts), len(lines), truncated, args, args_line, version)


def engine_hint(text: str) -> str | None:
    """Which engine's name appears most in the first lines (for a clearer wrong-engine error)."""
    low = text[:200_000].lower()
    counts = {e: 0 for e in ENGINE_LABELS}
    for engine, hint in _HINTS:
        counts[engine] += low.count(hint)
    best = max(counts, key=lambda e: counts[e])
    return best if counts[best] else None


__all__ = [
    "ENGINE_LABELS",
    "MAX_LINE_CHARS",
    "MAX_LOG_BYTES",
    "MAX_LOG_LINES",
    "Fact",
    "ParsedLog",
    "check_text",
    "clean_line",
    "engine_hint",
    "half_unit",
    "parse_log",
    "to_float",
    "to_int",
]
