"""Read the KV-cache lines an engine prints at start-up (vLLM v0 and v1, SGLang, TensorRT-LLM).

The log is untrusted text; the parse is bounded and linear in its size (`lines`). The lines
each engine prints are that engine's rules (`planner.core.engines.*.logs`); `parse` runs them.
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
from planner.core.logs.parse import check_text, engine_hint, log_rules, parse_log

__all__ = [
    "MAX_LINE_CHARS",
    "MAX_LOG_BYTES",
    "MAX_LOG_LINES",
    "PLANNING_KEYS",
    "Fact",
    "ParsedLog",
    "Rule",
    "check_text",
    "clean_line",
    "engine_hint",
    "half_unit",
    "log_rules",
    "parse_log",
    "to_float",
    "to_int",
]
