"""What an array's part of the cache (zarrfs.array.cache.entries) hands its callers, to give
back at the next step: the cache as a fetch began (to a chunk source, for `install`), and
what a write-back attempt takes (to the write-back, for `give_back` or `settle`)."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from ...grid import Index
from .cache import CacheEntry


@dataclass(frozen=True)
class Applied:
    """What a write into the cache did (ArrayCache.write): how many of its pieces it wrote,
    the chunks they made whole (all written, none read) and the load in flight of the next
    piece's chunk, which stopped it (None: all were written)."""

    pieces: int
    whole: list[Index]
    pending: Future[CacheEntry] | None


@dataclass(frozen=True)
class FetchStart:
    """The cache as a fetch of a read chunk began (ArrayCache.install)."""

    held: bool  # it had an entry for the chunk (partly written)
    drops: int  # the array's count of stale entries dropped
    merging: bool  # the entry was dirty: what is fetched is merged with its writes, and a
    # chunk not stored is the fill value whatever fill_missing_data_reads says


@dataclass
class WriteSnapshot:
    """What one attempt of a write-back sends: each unit's entry, data, version and
    written-mask (taken from the entry, so writes made meanwhile start a new one), and the
    bytes of the masks it holds, counted against the cache until it is settled or given back."""

    entries: dict[Index, CacheEntry]
    arrays: dict[Index, np.ndarray]
    versions: dict[Index, int]
    masks: dict[Index, np.ndarray | None]
    held: int = 0

    @classmethod
    def of(cls, entries: dict[Index, CacheEntry]) -> WriteSnapshot:
        """The entries' data, versions and written-masks as they are now."""
        masks = {u: e.written for u, e in entries.items()}
        held = sum(mask.nbytes for mask in masks.values() if mask is not None)
        versions = {u: e.version for u, e in entries.items()}
        return cls(entries, {u: e.data for u, e in entries.items()}, versions, masks, held)

    def let_go(self) -> int:
        """Its masks and arrays dropped (stored, or given back: a flush keeps its snapshots to
        its end); the bytes it held, to uncount."""
        held, self.held = self.held, 0
        self.masks.clear()
        self.arrays.clear()
        return held
