"""Structured logs: one JSON object per line on stdout, carrying the request id.

Only whitelisted record attributes reach the line, so a request body or a token can never be
logged by accident through `extra=`.
"""

from __future__ import annotations

import json
import logging
import math
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

request_id_var: ContextVar[str | None] = ContextVar("kvplan_request_id", default=None)

# `extra=` keys allowed onto a line; everything else on the record is ignored.
_FIELDS = ("method", "route", "path", "status", "duration_ms", "config")


# (whole second, its "YYYY-MM-DDTHH:MM:SS" text): every line of the same second reuses it.
_second: tuple[float, str] = (math.nan, "")


def timestamp(created: float) -> str:
    """`datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")`, the same text
    (datetime's round-half-even to microseconds, then truncation to milliseconds), with the
    calendar part formatted once per second: it was a third of an access line's cost."""
    global _second
    fraction, whole = math.modf(created)
    micros = round(fraction * 1e6)
    if micros >= 1_000_000:
        whole, micros = whole + 1, micros - 1_000_000
    elif micros < 0:  # before 1970: modf keeps the sign
        whole, micros = whole - 1, micros + 1_000_000
    cached_whole, text = _second  # one tuple read: safe across threads
    if whole != cached_whole:
        text = datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _second = (whole, text)
    return f"{text}.{micros // 1000:03d}+00:00"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        request_id = request_id_var.get()
        if request_id is not None:
            line["request_id"] = request_id
        for name in _FIELDS:
            if name in record.__dict__:
                line[name] = record.__dict__[name]
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


def logging_config(level: str) -> dict[str, Any]:
    """A `logging.config.dictConfig` dict, also handed to uvicorn (`log_config=`).

    uvicorn's access log is off: `planner.access` writes one line per request instead, with the
    route template, status, duration and request id.
    """
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "planner.logs.JsonFormatter"}},
        "handlers": {
            "stdout": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stdout",
            }
        },
        "loggers": {
            "uvicorn": {"handlers": ["stdout"], "level": level.upper(), "propagate": False},
            "uvicorn.error": {"level": level.upper()},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "planner": {"handlers": ["stdout"], "level": level.upper(), "propagate": False},
        },
    }
