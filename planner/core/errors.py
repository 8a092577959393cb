"""Typed errors of the core. The API, CLI and page map them to problem+json once, at the edge.

Every error message is a `(code, params)` pair, as notes are: `ERROR_TEMPLATES` holds each
code's English template, and the English text is that template formatted with the params.
The page translates by looking the template up in its locale catalog (msgid = the English
template) and formatting the same params. Raise one as

    raise FieldError("tensor_parallel_size", "engine.tp_divides_heads", engine=..., tp=4, ...)

and register the code's template in one of the `errors_*` modules. Codes are a contract: add
new ones, never rename one. A param is a str, int, float or bool, or a nested `Message` (a
reason worded by another registered template); a list of scalars is shown as Python prints it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from planner.core.errors_edge import EDGE_ERRORS
from planner.core.errors_engines import ENGINE_ERRORS
from planner.core.errors_inputs import INPUT_ERRORS
from planner.core.errors_model import MODEL_ERRORS
from planner.core.errors_reasons import RECONCILE_REASONS

ERROR_TEMPLATES: dict[str, str] = {
    **MODEL_ERRORS,
    **ENGINE_ERRORS,
    **INPUT_ERRORS,
    **EDGE_ERRORS,
    **RECONCILE_REASONS,
}

# The code of a message given as bare English (a raise site not yet converted to a code); its
# one param `text` is that English. tests/core/test_error_codes.py finds such sites.
UNCODED = "uncoded"


def _param(value: Any) -> Any:
    """Params are plain data (they travel in problem+json and across worker processes): a
    scalar, a list of scalars (as the message shows it), or a nested message."""
    if isinstance(value, bool | int | float | str | Message):
        return value
    if isinstance(value, list | tuple) and all(
        isinstance(v, bool | int | float | str) for v in value
    ):
        return value
    return str(value)


@dataclass(frozen=True, slots=True)
class Message:
    """A registered template's code and its params; `text` is the English wording."""

    code: str
    params: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, code: str, /, **params: Any) -> Message:
        """The message `code` with `params`; a string that is not a registered code is kept as
        English under `UNCODED`, so an unconverted raise site still says what it said."""
        if code not in ERROR_TEMPLATES:
            return cls(UNCODED, {"text": code})
        return cls(code, {k: _param(v) for k, v in params.items()})

    @property
    def text(self) -> str:
        if self.code == UNCODED:
            return str(self.params.get("text", ""))
        english = {k: v.text if isinstance(v, Message) else v for k, v in self.params.items()}
        return ERROR_TEMPLATES[self.code].format(**english)

    @classmethod
    def from_json(cls, code: str, params: Mapping[str, Any] | None) -> Message:
        """The message `as_json` wrote (a nested reason is a `{code, params}` object)."""
        out: dict[str, Any] = {}
        for k, v in (params or {}).items():
            nested = isinstance(v, Mapping) and set(v) == {"code", "params"}
            out[k] = cls.from_json(v["code"], v["params"]) if nested else v
        return cls(code, out)

    def as_json(self) -> dict[str, Any]:
        """Params for JSON: a nested message as its own `{code, params}`."""
        return {
            k: {"code": v.code, "params": v.as_json()} if isinstance(v, Message) else v
            for k, v in self.params.items()
        }


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One offending input: where (a path into the request) and what would work. `msg` is the
    English text of `code` + `params`; build one with `FieldProblem.of`."""

    loc: tuple[str | int, ...]
    msg: str
    code: str = UNCODED
    params: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, loc: tuple[str | int, ...], code: str, /, **params: Any) -> FieldProblem:
        return cls.from_message(loc, Message.of(code, **params))

    @classmethod
    def from_message(cls, loc: tuple[str | int, ...], message: Message) -> FieldProblem:
        return cls(tuple(loc), message.text, message.code, dict(message.params))

    @property
    def message(self) -> Message:
        if self.code == UNCODED and not self.params:
            return Message(UNCODED, {"text": self.msg})
        return Message(self.code, self.params)

    def at(self, loc: tuple[str | int, ...]) -> FieldProblem:
        """The same problem at another location (re-rooted into a larger request)."""
        return dataclasses.replace(self, loc=tuple(loc))

    @property
    def field(self) -> str:
        """Dotted path with indices in brackets, e.g. `[3].tensor_parallel_size`."""
        return dotted(self.loc)


def dotted(loc: tuple[str | int, ...]) -> str:
    """`("requests", 3, "count")` → `requests[3].count`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def invalid(code: str, /, **params: Any) -> Exception:
    """A request validator's error (raise it in a pydantic validator) as a registered message:
    pydantic reports it with `type` = the code and `ctx` = the params, and the edge carries
    both into problem+json."""
    from pydantic_core import PydanticCustomError

    message = Message.of(code, **params)
    # The template is the English already formatted; pydantic substitutes nothing in it.
    text = message.text.replace("{", "(").replace("}", ")")
    return PydanticCustomError(message.code, text, message.as_json())


def did_you_mean(ids: tuple[str, ...] | list[str]) -> Message | str:
    """An unknown id's " Did you mean: a, b?" (empty without suggestions)."""
    return Message.of("id.did_you_mean", ids=", ".join(ids)) if ids else ""


def _loc(field: str | tuple[str | int, ...]) -> tuple[str | int, ...]:
    return tuple(field.split(".")) if isinstance(field, str) else tuple(field)


class PlanError(Exception):
    """Base class: the request is well-formed but cannot be planned as asked."""

    title = "Request cannot be planned"
    type_slug = "plan-error"

    def __init__(
        self, code: str, problems: list[FieldProblem] | None = None, /, **params: Any
    ) -> None:
        self._init(Message.of(code, **params), problems)

    def _init(self, message: Message, problems: list[FieldProblem] | None) -> None:
        detail = message.text
        super().__init__(detail)
        self.detail = detail
        self.code = message.code
        self.params = dict(message.params)
        self.problems = problems or []

    @property
    def message(self) -> Message:
        code = getattr(self, "code", UNCODED)
        params = getattr(self, "params", {})
        return Message(UNCODED, {"text": self.detail}) if code == UNCODED else Message(code, params)

    def whole(self) -> FieldProblem:
        """The error as one problem of the request as a whole (no field named)."""
        return FieldProblem.from_message((), self.message)


class FieldError(PlanError):
    """One field holds a value the planner cannot use."""

    title = "Invalid field"
    type_slug = "invalid-field"

    def __init__(self, field: str | tuple[str | int, ...], code: str, /, **params: Any) -> None:
        self._init_field(_loc(field), Message.of(code, **params))

    def _init_field(self, loc: tuple[str | int, ...], message: Message) -> None:
        problem = FieldProblem.from_message(loc, message)
        self._init(Message.of("field.detail", field=problem.field, reason=message), [problem])

    @classmethod
    def at(cls, field: str | tuple[str | int, ...], problem: FieldProblem) -> FieldError:
        """`problem`'s message at another field (an inner error re-rooted)."""
        exc = cls.__new__(cls)
        FieldError._init_field(exc, _loc(field), problem.message)
        exc.suggestions = ()  # type: ignore[attr-defined]
        return exc


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
        self,
        field: str | tuple[str | int, ...],
        code: str,
        /,
        suggestions: tuple[str, ...] = (),
        **params: Any,
    ) -> None:
        super().__init__(field, code, **params)
        self.suggestions = tuple(suggestions)


__all__ = [
    "ERROR_TEMPLATES",
    "UNCODED",
    "FieldError",
    "FieldProblem",
    "Message",
    "ModelConfigError",
    "PlanError",
    "UnknownIdError",
    "did_you_mean",
    "dotted",
    "invalid",
]
