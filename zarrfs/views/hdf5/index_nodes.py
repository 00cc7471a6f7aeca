"""The nodes of a dataset's chunk index (`structures.ChunkBTree`) as a reader reads them: made
when first read, and kept a while, so that a reader that walks the whole index (`h5ls -v`,
`h5dump -p`, h5py's `visititems`: HDF5 sums the chunks' sizes) is answered from what is made.

A leaf read alone is made alone: its 64 chunks' stored sizes, one look at the store (a
reader of one chunk pays what it paid). The first leaf, where every walk starts, and a leaf
read right after the one before it go on a walk: that leaf and the 63 after it (the leaves
under one node above them, 4,096 chunks) are made together, from one look at the store,
which then asks only about the rows of chunks the store holds (`ZarrArray.stored_rows`: one
listing, learnt once per open). A walk of a sparse index of 10^6 chunks costs what its
stored chunks cost, and the 15,625 leaves are answered from memory, on the request loop
(`ready`), but for one request in 64. (An index of one leaf is one leaf: as before.)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from . import structures as h5

LEAVES_TOGETHER = 16  # (8,192 chunks, a few rows of them, in one look at the store)
_KEPT_INTERNAL = 16  # nodes above the leaves kept (a walk reads one of them per 64 leaves)
_UNKNOWN: Any = object()  # (the rows of stored chunks, not learnt yet)


class IndexNodes:
    """The nodes of `index`; a leaf's entries come from `entries(numbers, wide)`: the chunks'
    (sizes, addresses), `wide` when many leaves are made at once."""

    def __init__(self, index: h5.ChunkBTree,
                 entries: Callable[[np.ndarray, bool], tuple[np.ndarray, np.ndarray]]) -> None:
        self.index = index
        self._entries = entries
        self._internal: OrderedDict[tuple[int, int], bytes] = OrderedDict()
        self._leaves: OrderedDict[int, bytes] = OrderedDict()
        self._after = -1  # (the leaf after the last made: a read of it goes on a walk)
        self._lock = threading.Lock()

    def node(self, level: int, number: int) -> bytes:
        """The node, made if need be."""
        found = self.node_now(level, number)
        if found is not None:
            return found
        if level:
            made = self.index.internal(level, number)
            with self._lock:
                self._internal[(level, number)] = made
                while len(self._internal) > _KEPT_INTERNAL:
                    self._internal.popitem(last=False)
            return made
        return self._leaf(number)

    def node_now(self, level: int, number: int) -> bytes | None:
        """The node if it is made (no wait), else None."""
        with self._lock:
            if level:
                found = self._internal.get((level, number))
                if found is not None:
                    self._internal.move_to_end((level, number))
                return found
            return self._leaves.get(number)

    def _leaf(self, number: int) -> bytes:
        with self._lock:
            walking = number in (0, self._after)
        leaves = self.index.counts[0]
        stop = min(number + LEAVES_TOGETHER, leaves) if walking else number + 1
        numbers = np.arange(number * h5.NODE_ENTRIES, min(stop * h5.NODE_ENTRIES, self.index.count),
                            dtype=np.int64)
        sizes, addresses = self._entries(numbers, stop - number > 1)
        made = self.index.leaves(number, stop, sizes, addresses)
        with self._lock:
            self._leaves.update(zip(range(number, stop), made, strict=True))
            while len(self._leaves) > 2 * LEAVES_TOGETHER:
                self._leaves.popitem(last=False)
            self._after = stop
        return made[0]

    def forget(self) -> None:
        with self._lock:
            self._leaves.clear()
            self._after = -1


class StoredRows:
    """The rows of the array's grid that hold stored chunks, learnt once (`stored_rows`) when
    a walk first needs them, until forgotten (close-to-open)."""

    def __init__(self, learn: Callable[[], frozenset[int] | None]) -> None:
        self._learn = learn
        self._rows: Any = _UNKNOWN
        self._lock = threading.Lock()

    def rows(self) -> frozenset[int] | None:
        with self._lock:
            if self._rows is _UNKNOWN:
                self._rows = self._learn()
            found: frozenset[int] | None = self._rows
            return found

    def forget(self) -> None:
        with self._lock:
            self._rows = _UNKNOWN
