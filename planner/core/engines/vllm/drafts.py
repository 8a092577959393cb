"""vLLM's rules for a speculative draft per release (kvplan's speculative rules, in
planner.core.speculative, are 0.33's): a method a release lacks is refused with its reason, and
a release that reserved other lookahead slots gets its own."""

from __future__ import annotations

from dataclasses import replace

from planner.core.engines.versions import Version, since, version_text
from planner.core.engines.vllm.releases import (
    DFLASH_FILL_IN_SLOT_SINCE,
    DFLASH_SINCE,
    DRAFT_PP_SINCE,
    NGRAM_ASYNC_SINCE,
    PP_REFUSING_DRAFT_METHODS,
)
from planner.core.errors import FieldError
from planner.core.speculative import Speculation


def speculation_at(version: Version, sp: Speculation) -> Speculation:
    """The draft as this release sizes it (kvplan's speculative rules are 0.33's); a method the
    release lacks is refused with its reason."""
    if sp.method != "dflash":
        return sp
    if not since(version, DFLASH_SINCE):
        raise FieldError(
            ("speculative_config", "method"),
            "vllm.dflash_release",
            version=version_text(version),
        )
    if not since(version, DFLASH_FILL_IN_SLOT_SINCE):
        # Before 0.23 the scheduler reserved DFlash k lookahead slots, as for EAGLE.
        return replace(sp, lookahead_tokens=sp.num_speculative_tokens)
    return sp


def async_takes_draft(version: Version, method: str | None) -> bool:
    """Whether async scheduling runs beside this speculative method (n-gram: from 0.33)."""
    return method != "ngram" or since(version, NGRAM_ASYNC_SINCE)


def refuse_draft(version: Version, method: str | None, pp: int, async_on: bool | None) -> None:
    """What vLLM refuses to start for a speculative method: a draft head under pipeline
    parallelism before 0.30 (the draft's ModelConfig gets the target's pipeline size, and its
    model class does not implement SupportsPP), and an explicit async_scheduling=true with a
    method the release schedules synchronously only (VllmConfig's async-scheduling checks)."""
    if pp > 1 and method in PP_REFUSING_DRAFT_METHODS and not since(version, DRAFT_PP_SINCE):
        raise FieldError(
            "pipeline_parallel_size",
            "vllm.draft_pipeline",
            version=version_text(version),
            method=method,
        )
    if async_on and not async_takes_draft(version, method):
        raise FieldError(
            "async_scheduling", "vllm.async_scheduling_ngram", version=version_text(version)
        )


__all__ = ["async_takes_draft", "refuse_draft", "speculation_at"]
