"""Noticing what other writers changed (close-to-open consistency, `-o recheck=`).

The array remembers the generation of every stored object (chunk or shard) it has read or
written. A recheck asks the store for the generations of those objects in one batch
(`Store.stats`: one listing, or a stat each of a few local ones) and forgets the cached
chunks of the ones that changed, so they are read afresh; an unchanged chunk is never read
again. Dirty chunks stay: their write-back merges with what the other writer stored.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..grid import Index
from ..store import Store
from .cache import ArrayCache, Counters
from .geometry import Geometry
from .stored import PlainChunkIO

SEEN_LIMIT = 1 << 17  # objects remembered per array; past it, a recheck cannot vouch for all


@dataclass
class Changes:
    chunks: set[Index] = field(default_factory=set)
    uncertain: bool = False  # more objects were read than are remembered

    def __bool__(self) -> bool:
        return bool(self.chunks) or self.uncertain


class Seen:
    """Generations of the stored objects an array has read or written.

    A read's generation may be older than one noted while it was in flight (a write-back of
    this mount's, or a recheck): `note` keeps the newer one, which a read cannot tell by
    itself (generations have no order), by the clock of such notes. A read that finds another
    generation than the one seen (another writer's, read again once the cache let the object
    go) is a change, counted (`found`: part of the array's `changes`); what it read is the
    new version, so no stream reading it is stale for it."""

    def __init__(self, limit: int = SEEN_LIMIT) -> None:
        self._limit = limit
        self.found = 0  # reads that found another generation than the one seen
        self._lock = threading.Lock()
        self.generations: dict[Index, str | None] = {}
        self.overflowed = False
        self._clock = 0  # notes that were not a read's
        self._noted_at: dict[Index, int] = {}  # (the clock of each chunk's last such note)

    def clock(self) -> int:
        """Now, for a read about to begin (`note(read_since=)`)."""
        with self._lock:
            return self._clock

    def note(self, chunk: Index, generation: str | None, read_since: int | None = None) -> None:
        """`read_since`: the generation was read by a fetch that began at this `clock`; a
        generation stored or found by a recheck since then is the newer one, and stays."""
        with self._lock:
            if read_since is not None and self._noted_at.get(chunk, -1) > read_since:
                return
            before = self.generations.get(chunk)
            if read_since is not None and None not in (before, generation) and before != generation:
                self.found += 1
            if chunk in self.generations or len(self.generations) < self._limit:
                self.generations[chunk] = generation
                if read_since is None:
                    self._clock += 1
                    self._noted_at[chunk] = self._clock
            else:
                self.overflowed = True

    def note_read(self, found: Iterable[tuple[Index, str | None]], read_since: int) -> None:
        """`note` of many chunks read by fetches that began at `read_since`."""
        for chunk, generation in found:
            self.note(chunk, generation, read_since)

    def snapshot(self, chunks: Iterable[Index] | None) -> dict[Index, str | None]:
        with self._lock:
            if chunks is None:
                return dict(self.generations)
            return {c: self.generations[c] for c in chunks if c in self.generations}


class Rechecker:
    """What an array has seen of the store (`seen`), and noticing what changed since."""

    def __init__(self, array_cache: ArrayCache, io: PlainChunkIO, store: Store,
                 geometry: Callable[[], Geometry], counters: Counters) -> None:
        self.seen = Seen()
        self.array_cache = array_cache
        self.io = io
        self.store = store
        self.geometry = geometry
        self.counters = counters

    def recheck(self, chunks: Iterable[Index] | None = None) -> Changes:
        """Which of `chunks` (default: every object read or written) another writer changed;
        their clean cached data is dropped."""
        seen, geometry = self.seen, self.geometry()
        expected = seen.snapshot(chunks)
        keys = {geometry.chunk_key(chunk): chunk for chunk in expected}
        holds = math.prod(geometry.grid_shape)
        current = self.store.without_retries().generations(keys, holds=holds)
        changes = Changes(uncertain=chunks is None and seen.overflowed)
        for key, chunk in keys.items():
            if not self.store.capabilities.versioned and expected[chunk] is None:
                seen.note(chunk, current[key])  # reads report no generation: start from now
            elif current[key] != expected[chunk]:
                changes.chunks.add(chunk)
                seen.note(chunk, current[key])
        if changes.chunks:
            self.forget(changes.chunks)
        self.counters.add(rechecks=1, chunks_changed_outside=len(changes.chunks))
        return changes

    def forget(self, chunks: set[Index]) -> None:
        """Drop the clean cached data of stored objects that another writer changed."""
        self.array_cache.drop_clean(lambda unit: self.io.location(unit)[0] in chunks)
        for chunk in chunks:
            self.io.forget_index(chunk)
