"""Typed resolution errors. All are `FieldError`s (422 problem+json, CLI exit 2) whose `loc`
names the request field to change (`model` or `revision`)."""

from __future__ import annotations

from planner.core.errors import FieldError, ModelConfigError, UnknownIdError


class ModelNotFoundError(UnknownIdError):
    """Neither the catalog, a local directory nor the Hub knows the id."""


class GatedModelError(FieldError):
    """The Hub repo is gated or private and the token (HF_TOKEN) is missing or lacks access."""

    title = "Gated model"
    type_slug = "gated-model"


class HubUnavailableError(FieldError):
    """The Hub could not be asked: offline without a cached copy, no network, Hub access off."""

    title = "Model hub unavailable"
    type_slug = "hub-unavailable"
    suggestions: tuple[str, ...] = ()  # catalog ids close to the one asked ("did you mean")


class RevisionNotFoundError(FieldError):
    """The repo exists but not at that revision."""

    title = "Unknown revision"
    type_slug = "unknown-revision"


class ModelFilesError(ModelConfigError):
    """The repo or directory has no usable config.json."""


__all__ = [
    "GatedModelError",
    "HubUnavailableError",
    "ModelFilesError",
    "ModelNotFoundError",
    "RevisionNotFoundError",
]
