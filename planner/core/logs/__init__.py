"""Read the KV-cache lines an engine prints at start-up (vLLM v0 and v1, SGLang, TensorRT-LLM).

The log is untrusted text; the parse is bounded and linear in its size (`lines`). The lines
each engine prints are that engine's rules (`planner.core.engines.*.logs`, written with
`lines`); `planner.core.logs.parse` runs them. This face hands on `lines` alone: the engines'
rules import it, and `parse` reads the registry of engines, so it stays above them.
"""

from planner.core.logs.lines import (
    MAX_LINE_CHARS,
    MAX_LOG_BYTES,
    MAX_LOG_LINES,
    PLANNING_KEYS,
    Fact,
    ParsedLog,
    Rule,
    clean_line,
    half_unit,
    to_float,
    to_int,
)

__all__ = [
    "MAX_LINE_CHARS",
    "MAX_LOG_BYTES",
    "MAX_LOG_LINES",
    "PLANNING_KEYS",
    "Fact",
    "ParsedLog",
    "Rule",
    "clean_line",
    "half_unit",
    "to_float",
    "to_int",
]
