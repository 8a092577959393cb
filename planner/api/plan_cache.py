"""A bounded memo of plan answers, keyed by the exact request bytes.

`plan()` is a pure function of the request and the static catalog, so identical bodies get
identical bytes back; deployment tooling and the page's live update repeat the same questions.
Only answers without a `calibration_id` are kept (those read the store), and only successes.
Bounded three ways: entries, key size, and bytes held (keys + answers, KVPLAN_PLAN_CACHE_BYTES);
an answer bigger than an eighth of the byte bound is not kept, so one answer cannot flush the rest.
One per app (on `app.state`), touched only from the event loop, so no lock is needed.
"""

from __future__ import annotations

from collections import OrderedDict

MAX_ENTRIES = 1024
MAX_KEY_BYTES = 16 * 1024  # bigger bodies (pasted configs) are planned every time
DEFAULT_MAX_BYTES = 32 << 20
# Per-entry bookkeeping (the dict slot, two bytes objects' headers), counted with the bytes.
ENTRY_OVERHEAD_BYTES = 200


class PlanCache:
    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._items: OrderedDict[bytes, bytes] = OrderedDict()
        self._max = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _size(body: bytes, answer: bytes) -> int:
        return len(body) + len(answer) + ENTRY_OVERHEAD_BYTES

    def get(self, body: bytes) -> bytes | None:
        found = self._items.get(body)
        if found is None:
            self.misses += 1
            return None
        self._items.move_to_end(body)
        self.hits += 1
        return found

    def put(self, body: bytes, answer: bytes) -> None:
        size = self._size(body, answer)
        if len(body) > MAX_KEY_BYTES or self._max <= 0 or size > self.max_bytes // 8:
            return
        old = self._items.pop(body, None)
        if old is not None:
            self.bytes -= self._size(body, old)
        self._items[body] = answer
        self.bytes += size
        while len(self._items) > self._max or self.bytes > self.max_bytes:
            key, value = self._items.popitem(last=False)
            self.bytes -= self._size(key, value)

    def __len__(self) -> int:
        return len(self._items)
