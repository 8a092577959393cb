"""Engine versions: parsing what users type ("0.19", "0.19.0", "v0.10.1", "0.20.1rc1") and
rules keyed by the version ranges in which they held.

A final release is (major, minor, patch). A pre-release (a, b, rc) carries a fourth number that
ranks it (`PRE_KINDS`, then its own number), and it comes before its final release: 0.20.1rc1 <
0.20.1 (vLLM's "GPU KV cache size" formula changed between those two builds). A development
build named after a release ("0.9.1.dev705+g01220ce89") is that release: vLLM numbers its main
branch after the last tag, and that build's log prints 0.9.2's source lines, not 0.9.0's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from planner.core.errors import FieldError

# (major, minor, patch), or (major, minor, patch, pre-release rank) for a pre-release.
Version = tuple[int, ...]

PRE_KINDS = ("a", "b", "rc")
_PRE_STEP = 10_000  # rank = kind index × step + the pre-release's number

_VERSION_RE = re.compile(
    r"^\s*v?(\d{1,3})\.(\d{1,3})(?:\.(\d{1,3}))?"
    r"(?:\.\d{1,3})?"  # a fourth release number (vLLM 0.9.0.1, 0.10.1.1) is a rebuild
    r"(?:[.-]?(a|b|rc)(\d{1,4}))?"
    r"(?:[.-]?dev\d{0,6})?"
    r"(?:[.+-][A-Za-z0-9.+-]*)?\s*$"
)


# The rules ask the same few versions many times a plan: each answer is kept (pure functions of
# small hashable values).
@lru_cache(maxsize=1024)
def parse_version(text: str) -> Version | None:
    """ "0.19" → (0, 19, 0); "v0.10.1" → (0, 10, 1); "0.20.1rc1" → (0, 20, 1, rc1's rank);
    "0.15.2rc1.dev93+g11a4c9d" → rc1 (a build past rc1 is ordered with it); "0.9.1.dev705" →
    (0, 9, 1); else None."""
    m = _VERSION_RE.match(text)
    if not m:
        return None
    base = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    if not m.group(4):
        return base  # a final release, or a development build named after it
    kind, number = m.group(4), int(m.group(5))
    return (*base, PRE_KINDS.index(kind) * _PRE_STEP + min(number, _PRE_STEP - 1))


def is_prerelease(version: Version) -> bool:
    return len(version) > 3


def release_order(version: Version) -> tuple[int, ...]:
    """A sort key: a pre-release before its final release, its kinds in PEP 440 order."""
    if is_prerelease(version):
        return (*version[:3], 0, version[3])
    return (*version[:3], 1, 0)


@lru_cache(maxsize=1024)
def version_text(version: Version) -> str:
    major, minor, patch = version[:3]
    if is_prerelease(version):
        kind, number = divmod(version[3], _PRE_STEP)
        return f"{major}.{minor}.{patch}{PRE_KINDS[kind]}{number}"
    return f"{major}.{minor}" if patch == 0 else f"{major}.{minor}.{patch}"


@dataclass(frozen=True, slots=True)
class Releases:
    """The releases an engine's rules were verified against: every minor line from `first` to
    `last` (inclusive), any patch release or pre-release of them."""

    first: Version
    last: Version
    default: Version

    def resolve(self, text: str | None, *, label: str) -> Version:
        if text is None:
            return self.default
        version = parse_version(text)
        if version is None or not self.covers(version):
            raise FieldError(
                "engine_version",
                "engine.release_unsupported",
                label=label,
                text=text,
                releases=self.describe(),
                example=version_text(self.default),
            )
        return version

    def covers(self, version: Version) -> bool:
        return self.first[:2] <= version[:2] <= self.last[:2]

    def clamp(self, version: Version) -> Version:
        """The nearest covered release: the first or last minor line's, else `version`."""
        if version[:2] < self.first[:2]:
            return self.first
        if version[:2] > self.last[:2]:
            return self.last
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


@lru_cache(maxsize=4096)
def since(version: Version, first: tuple[int, ...]) -> bool:
    """Whether `version` has a rule whose first release is `first`: a minor line ((0, 26), or
    (0, 11, 0)) holds for every build of that line, its x.y.0 pre-releases included (they are
    cut from the line's release branch); a patch release ((0, 20, 1)) holds from that final
    release on, so its own pre-releases come before it (0.20.1rc1 does not have it)."""
    if len(first) < 3 or first[2] == 0:
        return version[:2] >= first[:2]
    return release_order(version) >= release_order(first)


__all__ = [
    "PRE_KINDS",
    "Releases",
    "Version",
    "is_prerelease",
    "parse_version",
    "release_order",
    "since",
    "version_text",
]
