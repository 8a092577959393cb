"""Bounded memos for what a plan derives from objects that do not change once built.

A model's shape, the catalog's models and the engines are frozen, and the catalog hands out the
same model object for the same id while it keeps it. What `plan()` derives from them alone
(layer specs bound to an engine, per-rank stacks, the answer's model section) is kept here,
keyed by those objects' identities plus hashable settings, so a plan computes only what depends
on its context, workload and budget.

An entry holds the objects it is keyed by, so none of them can die and leave its id to another
object while the entry lives: a key's ids match only the very objects it was stored for (two
live objects never share an id). A new object (another catalog, a model fetched again, a shape
a what-if changed) is a miss, never a stale answer. Results must be immutable and not None.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# Every memo made here, for `clear_memos` (tests compare answers with nothing kept).
_ALL: list[IdentityMemo[Any]] = []


class IdentityMemo(Generic[T]):
    """At most `size` results, keyed by the identity of some objects and a hashable rest;
    the oldest entry goes first. Safe to share between threads: a race computes twice."""

    __slots__ = ("_entries", "_size")

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: dict[Hashable, tuple[tuple[Any, ...], T]] = {}
        _ALL.append(self)

    def get(self, pinned: tuple[Any, ...], rest: Hashable) -> T | None:
        key = (id(pinned[0]), rest) if len(pinned) == 1 else _key(pinned, rest)
        hit = self._entries.get(key)
        return None if hit is None else hit[1]

    def put(self, pinned: tuple[Any, ...], rest: Hashable, value: T) -> T:
        entries = self._entries
        while len(entries) >= self._size:
            try:
                del entries[next(iter(entries))]
            except (KeyError, RuntimeError, StopIteration):  # another thread evicted it first
                break
        entries[_key(pinned, rest)] = (pinned, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()


def clear_memos() -> None:
    """Forget everything kept (what plan() answers is the same either way)."""
    for memo in _ALL:
        memo.clear()


def _key(pinned: tuple[Any, ...], rest: Hashable) -> Hashable:
    if len(pinned) == 1:
        return id(pinned[0]), rest
    return (*map(id, pinned), rest)


def memo_by_identity(size: int) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorate `fn(obj, *rest)`: memoised by `obj`'s identity and the hashable `rest`."""

    def decorate(fn: Callable[..., T]) -> Callable[..., T]:
        memo: IdentityMemo[T] = IdentityMemo(size)

        def wrapper(obj: Any, *rest: Hashable) -> T:
            pinned = (obj,)
            hit = memo.get(pinned, rest)
            if hit is not None:
                return hit
            return memo.put(pinned, rest, fn(obj, *rest))

        wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
        wrapper.__doc__ = fn.__doc__
        wrapper.__name__ = fn.__name__
        wrapper.memo = memo  # type: ignore[attr-defined]
        return wrapper

    return decorate


__all__ = ["IdentityMemo", "clear_memos", "memo_by_identity"]
