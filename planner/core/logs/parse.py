"""Parse a start-up log with the rules of every engine whose logs kvplan reads.

The rules come from the engines (`Engine.log_rules`, in registry order: the first rule that
matches a line wins), as do the hints that name the engine of a log no rule recognises and the
markers of a version line. Timestamps, process prefixes (`(EngineCore_DP0 pid=…)`, `[… TP0]`,
`[RANK 0]`), thousands separators and unknown lines are tolerated; several ranks may print the
same figure. Numbers are kept as the text the engine printed, so a reconciler knows their
display precision.
"""

from __future__ import annotations

from planner.core.engines import registry
from planner.core.errors import FieldError
from planner.core.logs.lines import (
    MAX_LINE_CHARS,
    MAX_LOG_BYTES,
    MAX_LOG_LINES,
    Fact,
    ParsedLog,
    Rule,
    clean_line,
    line_source,
    read_version,
)

_TEXT_CHARS = 300  # of a recognised line, echoed back (never the args lines: they may hold keys)
_HINT_CHARS = 200_000


def log_rules() -> tuple[tuple[str, Rule], ...]:
    """(engine name, rule) for every engine that reads logs, in registry order."""
    return tuple(
        (name, rule)
        for name in registry.log_engines()
        for rule in registry.engine_class(name).log_rules
    )


def _version_markers() -> tuple[str, ...]:
    classes = [registry.engine_class(name) for name in registry.log_engines()]
    return tuple(marker for cls in classes for marker in cls.log_version_markers)


def _match(
    rules: tuple[tuple[str, Rule], ...], line: str, low: str
) -> tuple[str, Rule, dict[str, str], int] | None:
    for engine, rule in rules:
        pos = low.find(rule.marker)
        if pos < 0:
            continue
        values = rule.match(line, low, pos)
        if values:
            return engine, rule, values, pos
    return None


def check_text(text: str) -> None:
    """Reject input that is not a text log: empty, binary, or over the size bounds."""
    if len(text) > MAX_LOG_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_LOG_BYTES:
        raise FieldError("log", "reconcile.log_too_large", mib=MAX_LOG_BYTES // (1 << 20))
    if not text.strip():
        raise FieldError("log", "reconcile.log_empty")
    sample = text[:65536]
    controls = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\t\n\r\x1b\x0c")
    if "\x00" in text or controls > max(8, len(sample) // 100):
        raise FieldError(
            "log",
            "reconcile.log_binary",
        )


def parse_log(text: str) -> ParsedLog:
    """Every recognised line of `text` (checked with `check_text` first)."""
    check_text(text)
    lines = text.rstrip("\n").split("\n")
    if len(lines) > MAX_LOG_LINES:
        raise FieldError("log", "reconcile.too_many_lines", n_lines=len(lines), most=MAX_LOG_LINES)
    rules = log_rules()
    markers = _version_markers()
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
            version = read_version(line, low, markers)
        found = _match(rules, line, low)
        if found is None:
            continue
        engine, rule, values, pos = found
        if rule.kind == "args":
            for key, value in values.items():
                if key not in args:
                    args[key] = value
                    args_line[key] = number
            text_out = f"{rule.marker.rstrip(':(')} … ({len(values)} planning settings read)"
        else:
            text_out = line.strip()[:_TEXT_CHARS]
        facts.append(Fact(engine, rule.kind, values, number, line_source(line[:pos]), text_out))
    return ParsedLog(
        tuple(facts), len(lines), truncated, args, args_line, version, registry.DEFAULT_ENGINE
    )


def engine_hint(text: str) -> str | None:
    """Which engine's name appears most in the first lines (for a clearer wrong-engine error)."""
    low = text[:_HINT_CHARS].lower()
    counts = {
        name: sum(low.count(hint) for hint in registry.engine_class(name).log_hints)
        for name in registry.log_engines()
    }
    best = max(counts, key=lambda e: counts[e])
    return best if counts[best] else None


__all__ = ["check_text", "engine_hint", "log_rules", "parse_log"]
