"""One prefix shared across a workload's entries, and how many requests reuse each prefix: the
arithmetic of vLLM's block pool (a cached block is held once, by every request whose prefix
hashes to it)."""

from __future__ import annotations

from collections.abc import Sequence

from planner.core import schema as s
from planner.core.errors import FieldError


def one_prefix(
    mixes: tuple[s.RequestMix, ...], prefix: int
) -> tuple[tuple[s.RequestMix, ...], bool]:
    """`shared_prefix_tokens`: every entry starts with the same prefix, held once in all."""
    if not prefix:
        return mixes, False
    if any(m.prefix_tokens for m in mixes):
        raise FieldError("shared_prefix_tokens", "prefix.shared_and_per_entry")
    shortest = min(m.context_tokens for m in mixes)
    if prefix > shortest:
        raise FieldError(
            "shared_prefix_tokens",
            "prefix.longer_than_request",
            prefix=prefix,
            shortest=shortest,
        )
    return tuple(m.model_copy(update={"prefix_tokens": prefix}) for m in mixes), True


def prefix_reusers(
    mixes: Sequence[s.RequestMix], shared: Sequence[int], *, across: bool = False
) -> tuple[int, ...]:
    """Per entry, the requests that reuse a prefix already held (vLLM's block pool: a cached
    block is shared by every request whose prefix hashes to it, `KVCacheManager`'s
    `get_computed_blocks`): all but the first holder of each prefix."""
    out: list[int] = []
    held = False
    for m, sh in zip(mixes, shared, strict=True):
        if not sh:
            out.append(0)
        elif across and held:
            out.append(m.count)
        else:
            out.append(m.count - 1)
            held = True
    return tuple(out)


__all__ = ["one_prefix", "prefix_reusers"]
