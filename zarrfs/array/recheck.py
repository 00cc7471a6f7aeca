"""Noticing what other writers changed (close-to-open consistency, `-o recheck=`).

The array remembers the generation of every stored object (chunk or shard) it has read or
written. A recheck asks the store for the generations of those objects in one batch (a stat
each locally, one listing on a remote store) and forgets the cached chunks of the ones that
changed, so they are read afresh; an unchanged chunk is never read again. Dirty chunks stay:
their write-back merges with what the other writer stored.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..grid import Index

if TYPE_CHECKING:
    from .core import ZarrArray

SEEN_LIMIT = 1 << 17  # objects remembered per array; past it, a recheck cannot vouch for all


@dataclass
class Changes:
    chunks: set[Index] = field(default_factory=set)
    uncertain: bool = False  # more objects were read than are remembered

    def __bool__(self) -> bool:
        return bool(self.chunks) or self.uncertain


class Seen:
    """Generations of the stored objects an array has read or written."""

    def __init__(self, limit: int = SEEN_LIMIT) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self.generations: dict[Index, str | None] = {}
        self.overflowed = False

    def note(self, chunk: Index, generation: str | None) -> None:
        with self._lock:
            if chunk in self.generations or len(self.generations) < self._limit:
                self.generations[chunk] = generation
            else:
                self.overflowed = True

    def snapshot(self, chunks: Iterable[Index] | None) -> dict[Index, str | None]:
        with self._lock:
            if chunks is None:
                return dict(self.generations)
            return {c: self.generations[c] for c in chunks if c in self.generations}


def recheck(array: ZarrArray, chunks: Iterable[Index] | None = None) -> Changes:
    """Which of `chunks` (default: every object read or written) another writer changed;
    their clean cached data is dropped."""
    expected = array.seen.snapshot(chunks)
    keys = {array.chunk_key(chunk): chunk for chunk in expected}
    current = array.store.without_retries().generations(keys)
    changes = Changes(uncertain=chunks is None and array.seen.overflowed)
    for key, chunk in keys.items():
        if not array.store.versioned and expected[chunk] is None:
            array.seen.note(chunk, current[key])  # reads report no generation: start from now
        elif current[key] != expected[chunk]:
            changes.chunks.add(chunk)
            array.seen.note(chunk, current[key])
    if changes.chunks:
        forget(array, changes.chunks)
    array.shared.counters.add(rechecks=1, chunks_changed_outside=len(changes.chunks))
    return changes


def forget(array: ZarrArray, chunks: set[Index]) -> None:
    """Drop the clean cached data of stored objects that another writer changed."""
    cache = array.cache
    with array._lock:
        for owner, unit in [k for k in cache.entries if k[0] == array.owner]:
            entry = cache.entries[(owner, unit)]
            if not entry.dirty and array.io.location(unit)[0] in chunks:
                del cache.entries[(owner, unit)]
                cache.total_bytes -= entry.nbytes
        array.mutations += 1  # streams of what the store held are stale too
    for chunk in chunks:
        array.io.forget_index(chunk)
