"""Prometheus metrics, in a registry owned by one app (so tests can build many apps).

Labels are bounded: route *templates* (never raw paths), a fixed method set, status codes, and
plan outcomes. With several uvicorn workers each process has its own registry; scrape each
worker (or run one worker per container, the documented deployment).
"""

from __future__ import annotations

from typing import Any, Literal

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client import generate_latest as _generate_latest

PlanOutcome = Literal["ok", "invalid", "unplannable"]
RefusedReason = Literal["cost", "busy", "deadline", "worker"]

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Sub-millisecond to seconds: a plan takes well under 10 ms, a sweep up to about a second.
_BUCKETS_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "kvplan_http_requests",
            "HTTP requests answered, by method, route template and status.",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "kvplan_http_request_duration_seconds",
            "Time to answer, by method and route template.",
            ("method", "route"),
            buckets=_BUCKETS_SECONDS,
            registry=self.registry,
        )
        self.plans = Counter(
            "kvplan_plans",
            "Plans computed (sweep points included), by outcome: ok, invalid (request "
            "rejected), unplannable (a core PlanError).",
            ("outcome",),
            registry=self.registry,
        )
        # Exported as zeros, so rates work from the first scrape; kept for count_plan.
        self._plan_children = {
            outcome: self.plans.labels(outcome) for outcome in ("ok", "invalid", "unplannable")
        }
        self._request_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}
        self.refused = Counter(
            "kvplan_work_refused",
            "Requests refused or stopped by the work limits, by reason: cost (over "
            "KVPLAN_MAX_REQUEST_COST / KVPLAN_MAX_RESPONSE_BYTES), busy (queue full), deadline "
            "(killed at KVPLAN_WORK_DEADLINE_SECONDS), worker (out of memory or exited).",
            ("reason",),
            registry=self.registry,
        )
        for reason in ("cost", "busy", "deadline", "worker"):
            self.refused.labels(reason)
        self.disconnects = Counter(
            "kvplan_client_disconnects",
            "Requests whose client went away before the answer was sent.",
            registry=self.registry,
        )

    def count_refused(self, reason: RefusedReason) -> None:
        self.refused.labels(reason).inc()

    def count_disconnect(self) -> None:
        self.disconnects.inc()

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        method = method if method in _METHODS else "OTHER"
        # The labelled children, looked up once per label set (`labels()` takes a lock and
        # builds its key every call); the label sets are bounded (module docstring).
        key = (method, route, status)
        found = self._request_children.get(key)
        if found is None:
            found = self._request_children[key] = (
                self.requests.labels(method, route, str(status)),
                self.latency.labels(method, route),
            )
        found[0].inc()
        found[1].observe(seconds)

    def count_plan(self, outcome: PlanOutcome, n: int = 1) -> None:
        self._plan_children[outcome].inc(n)

    def exposition(self) -> bytes:
        return _generate_latest(self.registry)
