"""Bytes kept of what was read or made, by recency within a budget: one keeper per kind of
view (and the stored chunks of arrays of strings) for the whole daemon, so what they hold
stays bounded however many files are open (the chunk cache bounds the rest)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from ...codecs import BytesLike


class HeldBytes:
    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._lock = threading.Lock()
        self._held: OrderedDict[Hashable, BytesLike] = OrderedDict()
        self._bytes = 0

    def get(self, key: Hashable) -> BytesLike | None:
        with self._lock:
            found = self._held.get(key)
            if found is not None:
                self._held.move_to_end(key)
            return found

    def put(self, key: Hashable, value: BytesLike) -> None:
        """Keep `value`, dropping the least recently used past the budget (never the newest:
        its reader is usually in the middle of it)."""
        with self._lock:
            old = self._held.pop(key, None)
            self._bytes += len(value) - (0 if old is None else len(old))
            self._held[key] = value
            while self._bytes > self.budget and len(self._held) > 1:
                self._bytes -= len(self._held.popitem(last=False)[1])
