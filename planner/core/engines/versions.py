"""Engine versions: parsing what users type ("0.19", "0.19.0", "v0.10.1") and rules keyed by
the version ranges in which they held."""

from __future__ import annotations

import re
from dataclasses import dataclass

from planner.core.errors import FieldError

Version = tuple[int, int, int]

_VERSION_RE = re.compile(
    r"^\s*v?(\d{1,3})\.(\d{1,3})(?:\.(\d{1,3}))?(?:[.+-]?[A-Za-z0-9.+-]*)?\s*$"
)


def parse_version(text: str) -> Version | None:
    """ "0.19" → (0, 19, 0); "v0.10.1" → (0, 10, 1); "0.11.0rc1" → (0, 11, 0); else None."""
    m = _VERSION_RE.match(text)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def version_text(version: Version) -> str:
    major, minor, patch = version
    return f"{major}.{minor}" if patch == 0 else f"{major}.{minor}.{patch}"


@dataclass(frozen=True, slots=True)
class Releases:
    """The releases an engine's rules were verified against: every minor line from `first` to
    `last` (inclusive), any patch release of them."""

    first: Version
    last: Version
    default: Version

    def resolve(self, text: str | None, *, label: str) -> Version:
        if text is None:
            return self.default
        version = parse_version(text)
        if version is None or not (self.first[:2] <= version[:2] <= self.last[:2]):
            raise FieldError(
                "engine_version",
                f"{label} {text!r} is not a supported release; kvplan follows {label} "
                f"{self.describe()} (e.g. {version_text(self.default)!r})",
            )
        return version

    def describe(self) -> str:
        if self.first[:2] == self.last[:2]:
            return version_text(self.first)
        return f"{version_text(self.first)} to {version_text(self.last)}"

    def minors(self) -> list[str]:
        """Every supported minor line, oldest first (for listings)."""
        out = []
        major, minor = self.first[:2]
        while (major, minor) <= self.last[:2]:
            out.append(f"{major}.{minor}")
            minor += 1
            if minor > 99:
                major, minor = major + 1, 0
        return out


def since(version: Version, first: tuple[int, ...]) -> bool:
    """Whether `version` is at or after `first` (a rule's first release: (0, 26), or a patch
    release such as (0, 20, 1))."""
    return version[: len(first)] >= first


__all__ = ["Releases", "Version", "parse_version", "since", "version_text"]
