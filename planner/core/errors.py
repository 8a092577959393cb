"""Typed errors of the core. The API, CLI and page map them to problem+json once, at the edge."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One offending input: where (a path into the request) and what would work."""

    loc: tuple[str | int, ...]
    msg: str

    @property
    def field(self) -> str:
        """Dotted path with indices in brackets, e.g. `[3].tensor_parallel_size`."""
        out = ""
        for part in self.loc:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
        return out


class PlanError(Exception):
    """Base class: the request is well-formed but cannot be planned as asked."""

    title = "Request cannot be planned"
    type_slug = "plan-error"

    def __init__(self, detail: str, problems: list[FieldProblem] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.problems = problems or []


class FieldError(PlanError):
    """One field holds a value the planner cannot use."""

    title = "Invalid field"
    type_slug = "invalid-field"

    def __init__(self, field: str | tuple[str | int, ...], msg: str) -> None:
        loc = tuple(field.split(".")) if isinstance(field, str) else field
        problem = FieldProblem(loc, msg)
        super().__init__(f"{problem.field}: {msg}", [problem])


class ModelConfigError(FieldError):
    """The model config is missing or contradicts what a KV cache needs."""

    title = "Invalid model config"
    type_slug = "invalid-model-config"


class UnknownIdError(FieldError):
    """A catalog id (model, GPU, calibration) that does not exist; `suggestions` are the
    closest ids that do ("did you mean"), closest first."""

    title = "Unknown id"
    type_slug = "unknown-id"

    def __init__(
        self, field: str | tuple[str | int, ...], msg: str, suggestions: tuple[str, ...] = ()
    ) -> None:
        super().__init__(field, msg)
        self.suggestions = tuple(suggestions)
