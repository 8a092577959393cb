"""The KV-cache lines vLLM prints at start-up (v1 and the older v0 engine), as parse rules."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from planner.core.engines.versions import parse_version
from planner.core.engines.vllm.releases import (
    LOG_LINE_FILES,
    LOG_SOURCE_LINES,
    SEPARATE_LINES_ASSUMED,
    SEPARATE_LINES_RELEASES,
)
from planner.core.logs.lines import (
    INT,
    KV_EQ,
    KV_PY,
    NUM,
    P_INT,
    P_NUM,
    P_NUM_GIB,
    P_PAREN_INT,
    P_PAREN_NUM_GIB,
    SNUM,
    Rule,
    after,
    labelled,
    labels,
    pairs,
    re_at,
)
from planner.core.notes import Param


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
        value = after(line, low, key + "=", P_NUM, pos)
        if value is not None:
            out[key] = value
    return out if "kv_cache_size" in out else None


_V1_ERROR = [
    ("max_model_len", "max seq len", P_PAREN_INT),
    ("available_gib", "available kv cache memory", P_PAREN_NUM_GIB),
    ("estimated_max_model_len", "estimated maximum model length is", P_INT),
]
_NEEDED = re.compile(r"\(\s{0,4}" + NUM + r"\s{0,4}GiB kv cache is needed", re.IGNORECASE)


def _v1_error(line: str, low: str, pos: int) -> dict[str, str] | None:
    """`To serve at least one request with the model's max seq len (N), (X GiB KV cache is
    needed, which is larger than the available KV cache memory (Y GiB). … is M.`"""
    out = labels(line, low, 0, _V1_ERROR)
    start = low.rfind("(", max(0, pos - 40), pos)
    m = _NEEDED.match(line, start) if start >= 0 else None
    if m is None:
        return None
    out["needed_gib"] = m.group(1)
    return out


LOG_RULES: tuple[Rule, ...] = (
    Rule(
        "available_kv",
        "available kv cache memory:",
        re_at(r"available kv cache memory:\s{0,4}" + NUM + r"\s{0,4}GiB", ("gib",)),
    ),
    Rule(
        "kv_tokens",
        "gpu kv cache size:",
        re_at(r"gpu kv cache size:\s{0,4}" + INT + r"\s{0,4}tokens", ("tokens",)),
    ),
    Rule(
        "max_concurrency",
        "maximum concurrency for",
        re_at(
            r"maximum concurrency for\s{0,4}"
            + INT
            + r"\s{0,4}tokens per request:\s{0,4}"
            + NUM
            + r"\s{0,2}x",
            ("context_tokens", "x"),
        ),
    ),
    Rule(
        "num_blocks",
        "gpu blocks:",
        re_at(
            r"gpu blocks:\s{0,4}" + INT + r"(?:,\s{0,4}#?\s{0,4}cpu blocks:\s{0,4}" + INT + ")?",
            ("gpu_blocks", "cpu_blocks"),
        ),
    ),
    Rule(
        "num_blocks",
        "cuda blocks:",
        re_at(
            r"cuda blocks:\s{0,4}" + INT + r"(?:,\s{0,4}#?\s{0,4}cpu blocks:\s{0,4}" + INT + ")?",
            ("gpu_blocks", "cpu_blocks"),
        ),
    ),
    Rule(
        "weights",
        "model loading took",
        re_at(r"model loading took\s{0,4}" + NUM + r"\s{0,4}(GiB|GB)", ("gib", "unit")),
    ),
    Rule(
        "weights",
        "loading model weights took",
        re_at(r"loading model weights took\s{0,4}" + NUM + r"\s{0,4}(GiB|GB)", ("gib", "unit")),
    ),
    Rule("v0_profile", "memory profiling results:", _v0_profile),
    Rule(
        "v0_instance_memory",
        "the current vllm instance can use total_gpu_memory",
        re_at(
            r"the current vllm instance can use total_gpu_memory\s{0,4}\(\s{0,4}"
            + NUM
            + r"\s{0,4}GiB\)\s{0,4}x gpu_memory_utilization\s{0,4}\(\s{0,4}"
            + NUM
            + r"\)\s{0,4}=\s{0,4}"
            + NUM,
            ("total_gib", "utilization", "requested_gib"),
        ),
    ),
    Rule(
        "v0_breakdown",
        "model weights take",
        labelled(
            [
                ("weights_gib", "model weights take", P_NUM_GIB),
                ("non_torch_gib", "non_torch_memory takes", P_NUM_GIB),
                ("activation_gib", "pytorch activation peak memory takes", P_NUM_GIB),
                ("kv_gib", "reserved for kv cache is", P_NUM_GIB),
            ],
            ("kv_gib",),
        ),
    ),
    Rule(
        "v1_profile",
        "total non kv cache memory:",
        labelled(
            [
                ("non_kv_gib", "total non kv cache memory:", P_NUM_GIB),
                ("activation_gib", "torch peak memory increase:", P_NUM_GIB),
                ("non_torch_gib", "non-torch forward increase memory:", P_NUM_GIB),
                ("weights_gib", "weights memory:", P_NUM_GIB),
            ],
            ("non_kv_gib",),
        ),
    ),
    Rule(
        "requested_memory",
        "requested memory:",
        re_at(r"requested memory:\s{0,4}" + NUM + r"\s{0,4}GiB", ("gib",)),
    ),
    Rule(
        "cuda_graph",
        "graph capturing finished in",
        re_at(
            r"graph capturing finished in\s{0,4}[0-9]{1,6}\s{0,4}secs?,\s{0,4}took\s{0,4}"
            + SNUM
            + r"\s{0,4}GiB",
            ("gib",),
        ),
    ),
    Rule(
        "padding",
        "padding layers, may waste at most",
        re_at(
            r"add\s{1,4}" + INT + r"\s{1,4}padding layers, may waste at most\s{0,4}" + NUM + "%",
            ("layers", "pct"),
            back="add ",
        ),
    ),
    Rule("v1_error", "gib kv cache is needed", _v1_error),
    Rule(
        "v0_error",
        "maximum number of tokens that can be stored in kv cache",
        labelled(
            [
                ("max_model_len", "max seq len", P_PAREN_INT),
                ("max_tokens", "stored in kv cache", P_PAREN_INT),
            ],
            ("max_tokens",),
            whole_line=True,
        ),
    ),
    Rule("args", "non-default args:", pairs(KV_PY), echo=False),
    Rule("args", "with config:", pairs(KV_EQ), echo=False),
)

# Words in lines no rule recognises that name vLLM (for a clearer wrong-engine error).
LOG_HINTS = ("vllm", "enginecore")
# Lines that print the release: the API server's, the v0 engine's start-up line, `vllm --version`.
LOG_VERSION_MARKERS = ("vllm api server version", "llm engine (", "vllm version")

LOG_EXAMPLE = "'Available KV cache memory: 6.51 GiB' / 'GPU KV cache size: 42,656 tokens'"


# Fact kinds (engines/vllm/logs.py) only the V1 engine prints, and those of the older v0 engine.
V1_KINDS = frozenset({"available_kv", "kv_tokens", "v1_error", "padding", "v1_profile"})
V0_KINDS = frozenset({"v0_profile", "v0_breakdown", "v0_instance_memory", "v0_error", "num_blocks"})
_KINDS = tuple(LOG_LINE_FILES)


def _tags(facts: Sequence[Any]) -> list[tuple[str, int]]:
    """(fact kind, source line) of each line that prints where vLLM logged it."""
    out: list[tuple[str, int]] = []
    for f in facts:
        file = LOG_LINE_FILES.get(f.kind)
        m = re.search(re.escape(file) + r":(\d{1,5})\b", f.text) if file else None
        if m and (f.kind, int(m.group(1))) not in out:
            out.append((f.kind, int(m.group(1))))
    return out


def _likeliest(releases: list[str]) -> str:
    """Of releases printing the same lines, the first release of the newest minor line among
    them: a file that kept its lines across minor lines is most often the newer line's (the
    0.11.0 log of vllm#27508 prints 0.10.2's and 0.11.0's gpu_worker.py:298), and a minor
    line's patch releases seldom change a rule (0.20.1 does: then its lines differ too)."""
    versions = [v for v in map(parse_version, releases) if v is not None]
    newest = max(v[:2] for v in versions)
    return next(r for r, v in zip(releases, versions, strict=True) if v[:2] == newest)


def version_from_log(facts: Sequence[Any]) -> tuple[str, str, dict[str, Param]] | None:
    """(release, note code saying how it was inferred and how sure, that note's own params) from
    a vLLM log's own lines, where they tell: the source lines they print, matched against every
    release's (releases.LOG_SOURCE_LINES); else the layout of its KV-size line."""
    tags = _tags(facts)
    scores = {
        release: sum(1 for kind, line in tags if line in lines[_KINDS.index(kind)])
        for release, lines in LOG_SOURCE_LINES.items()
    }
    best = max(scores.values(), default=0)
    if best:
        found = [release for release, score in scores.items() if score == best]
        source = ", ".join(f"{LOG_LINE_FILES[kind]}:{line}" for kind, line in tags)
        params: dict[str, Param] = {"source": source}
        if best < len(tags):
            code = "reconcile.vllm.version_from_some_line_numbers"
            params.update(matched=best, total=len(tags), releases=", ".join(found))
        elif len(found) > 1:
            code = "reconcile.vllm.version_from_line_numbers_of_several"
            params["releases"] = ", ".join(found)
        else:
            code = "reconcile.vllm.version_from_line_numbers"
        return _likeliest(found), code, params
    # From 0.28 "GPU KV cache size" and "Maximum concurrency" share one log line.
    if any(f.kind == "kv_tokens" and "concurrency" not in f.text.lower() for f in facts):
        first, last = SEPARATE_LINES_RELEASES
        return (
            SEPARATE_LINES_ASSUMED,
            "reconcile.vllm.version_from_separate_lines",
            {"first": first, "last": last},
        )
    return None


def release_of_lines(facts: Sequence[Any]) -> tuple[str, str] | None:
    """(release, its lines) where every source line the log prints is that release's alone."""
    found = version_from_log(facts)
    if found is None or found[1] != "reconcile.vllm.version_from_line_numbers":
        return None
    return found[0], str(found[2]["source"])


__all__ = [
    "LOG_EXAMPLE",
    "LOG_HINTS",
    "LOG_RULES",
    "LOG_VERSION_MARKERS",
    "V0_KINDS",
    "V1_KINDS",
    "release_of_lines",
    "version_from_log",
]
