"""The notes on how a log's release was found: named in it, inferred from the source lines it
prints (and how sure that is), or assumed. Part of `planner.core.notes.TEMPLATES`."""

from __future__ import annotations

VERSION_TEMPLATES: dict[str, str] = {
    "reconcile.version_missing": (
        "The log names no {engine} version; {engine} {version} rules assumed."
    ),
    "reconcile.version_unreadable": "Unreadable version {named!r}; {engine} {version} assumed.",
    "reconcile.version_outside_rules": (
        "The log is from {engine} {named}; kvplan's rules cover {covered}, so {version} rules "
        "were used."
    ),
    # The version line and the source lines disagree (a development build's name).
    "reconcile.version_lines_differ": (
        "The log names {engine} {named}, but its line numbers ({source}) are those of {found} "
        "alone: a build between releases? The named release's rules were used."
    ),
    # Sure: every source line the log prints is this release's, and no other release's.
    "reconcile.vllm.version_from_line_numbers": (
        "{engine} {version} rules, inferred from its line numbers ({source})."
    ),
    # Sure of the range: several releases print these lines.
    "reconcile.vllm.version_from_line_numbers_of_several": (
        "{engine} {version} rules, inferred from its line numbers ({source}), which releases "
        "{releases} all print: {version} is assumed, the first release of the newest minor "
        "line among them."
    ),
    # Partly: some lines are no release's (a build between releases).
    "reconcile.vllm.version_from_some_line_numbers": (
        "{engine} {version} rules, inferred from its line numbers: {matched} of the {total} "
        "({source}) are those of {releases}, the others no release's (a build between "
        "releases?)."
    ),
    # Not sure: only the layout of its lines tells a range of releases.
    "reconcile.vllm.version_from_separate_lines": (
        "{engine} {version} rules assumed: the log names no release and prints no line numbers "
        "kvplan knows; its KV-size line apart from the concurrency is printed by every release "
        "from {first} to {last} (give engine_version to be sure)."
    ),
}

__all__ = ["VERSION_TEMPLATES"]
