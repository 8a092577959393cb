"""A ring-buffer KV cache for a sliding window, checked against full attention with a window mask.

Three numbers are kept apart (seed 000): the cache length (how many slots hold data, at most the
capacity), the absolute position (keeps growing; RoPE uses it) and the physical slot
(position mod capacity, where the write lands). Mixing any two is a silent bug.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.lab.reference import (
    Array,
    Model,
    Options,
    attention,
    finish_layer,
    max_abs_diff,
    project,
    run_full,
)
from planner.lab.reference import first_mismatch as _first_mismatch


@dataclass(frozen=True, slots=True)
class RingStep:
    """State after writing the token at `position`."""

    position: int
    slot: int
    cache_tokens: int
    # slots[i] = absolute position held in physical slot i, None while still empty.
    slots: tuple[int | None, ...]


def ring_slots(tokens: int, capacity: int) -> tuple[RingStep, ...]:
    """Where each of `tokens` writes lands in a ring of `capacity` slots."""
    if capacity < 1:
        raise ValueError("capacity must be at least 1")
    held: list[int | None] = [None] * capacity
    steps: list[RingStep] = []
    for pos in range(tokens):
        slot = pos % capacity
        held[slot] = pos
        steps.append(RingStep(pos, slot, min(pos + 1, capacity), tuple(held)))
    return tuple(steps)


@dataclass(slots=True)
class RingCache:
    """One layer's K and V in `capacity` physical slots, (Hkv, capacity, d) each."""

    k: Array
    v: Array
    length: int = 0

    @classmethod
    def empty(cls, kv_heads: int, capacity: int, head_dim: int) -> RingCache:
        z = np.zeros((kv_heads, capacity, head_dim))
        return cls(z.copy(), z.copy())

    @property
    def capacity(self) -> int:
        return int(self.k.shape[1])

    def write(self, position: int, k_new: Array, v_new: Array) -> None:
        slot = position % self.capacity
        self.k[:, slot] = k_new[:, 0]
        self.v[:, slot] = v_new[:, 0]
        self.length = min(self.length + 1, self.capacity)

    def live(self) -> tuple[Array, Array]:
        # Slots fill 0, 1, ... before the first wrap, so the live ones are always a prefix.
        return self.k[:, : self.length], self.v[:, : self.length]


def run_ring(model: Model, x: Array, capacity: int) -> Array:
    """Decode x (N, D) token by token through per-layer ring caches; outputs (N, D)."""
    s = model.shape
    caches = [RingCache.empty(s.kv_heads, capacity, s.head_dim) for _ in model.layers]
    outs: list[Array] = []
    for pos in range(x.shape[0]):
        h = x[pos : pos + 1]
        positions = np.array([pos], dtype=np.int64)  # absolute, not the slot
        for w, ring in zip(model.layers, caches, strict=True):
            q, k_new, v_new = project(w, s, h, positions)
            ring.write(pos, k_new, v_new)
            k, v = ring.live()
            # Everything live is inside the window; slot order does not matter to softmax.
            mask = np.ones((1, ring.length), dtype=np.bool_)
            h = finish_layer(w, h, attention(q, k, v, mask))
        outs.append(h)
    return np.concatenate(outs, axis=0)


@dataclass(frozen=True, slots=True)
class RingCheck:
    tokens: int
    capacity: int
    max_abs_diff: float
    first_mismatch: int | None

    @property
    def passed(self) -> bool:
        return self.first_mismatch is None


def check_ring(model: Model, x: Array, capacity: int) -> RingCheck:
    """Ring decode vs a full forward whose mask keeps only the last `capacity` keys."""
    ring = run_ring(model, x, capacity)
    ref = run_full(model, x, Options(window_tokens=capacity))
    return RingCheck(x.shape[0], capacity, max_abs_diff(ring, ref), _first_mismatch(ring, ref))
