"""Plan again over an axis: the one way sweeps, the page's charts and recommend ask "and at
this context / batch / TP / dtype?", so none of them re-decides what `plan()` decides.

A variant is the base request with some fields changed and validated again; identical
variants are planned once (`Replanner` memoises by the canonical body)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from planner.core.errors import PlanError
from planner.core.inputs import CalibrationLike, Catalog
from planner.core.plan import plan
from planner.core.schema import Plan, PlanRequest

MAX_MEMO_ENTRIES = 4096  # one request's variants; a sweep's points are bounded by its schema


def variant(base: PlanRequest | Mapping[str, Any], changes: Mapping[str, Any]) -> PlanRequest:
    """The base request with `changes` applied, validated as a client body would be."""
    body = base.model_dump(exclude_unset=True) if isinstance(base, PlanRequest) else dict(base)
    return PlanRequest.model_validate({**body, **changes})


class Replanner:
    """`plan()` over variants of requests, memoised (one instance per question asked)."""

    __slots__ = ("calibration", "catalog", "memo")

    def __init__(self, catalog: Catalog, calibration: CalibrationLike | None = None) -> None:
        self.catalog = catalog
        self.calibration = calibration
        self.memo: dict[str, Plan] = {}

    def __call__(self, base: PlanRequest | Mapping[str, Any], **changes: Any) -> Plan:
        """Plan `base` with `changes`; raises PlanError like `plan()`."""
        request = variant(base, changes)
        key = request.model_dump_json()
        found = self.memo.get(key)
        if found is None:
            found = plan(request, catalog=self.catalog, calibration=self.calibration)
            if len(self.memo) < MAX_MEMO_ENTRIES:
                self.memo[key] = found
        return found

    def over(
        self, base: PlanRequest | Mapping[str, Any], points: Iterable[Mapping[str, Any]]
    ) -> list[Plan | PlanError]:
        """One plan (or the error that refused it) per point of the axis, in order."""
        out: list[Plan | PlanError] = []
        for changes in points:
            try:
                out.append(self(base, **changes))
            except PlanError as exc:
                out.append(exc)
        return out


__all__ = ["MAX_MEMO_ENTRIES", "Replanner", "variant"]
