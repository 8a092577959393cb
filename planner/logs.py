"""Structured logs: one JSON object per line on stdout, carrying the request id.

Only whitelisted record attributes reach the line, so a request body or a token can never be
logged by accident through `extra=`.
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

request_id_var: ContextVar[str | None] = ContextVar("kvplan_request_id", default=None)

# `extra=` keys allowed onto a line; everything else on the record is ignored.
_FIELDS = ("method", "route", "path", "status", "duration_ms", "config")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
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
