"""One array's part of the mount's chunk cache (zarrfs.array.cache): the one place that takes
the cache's lock for the array and changes its entries. It keeps the array's dirty bytes and
the mount's in step, knows which loads are in flight (so two readers of a chunk wait on one
decode), and counts `mutations`: bumped after any element changes (zarrfs.array.reads.streaming).

Every method takes the lock itself and does its whole step under it; callers never hold it.
A reader is lent an entry's data to use outside the lock: writers copy it first (`lent`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future

import numpy as np

from ...codecs import ChunkSpec
from ...grid import Index, Piece
from ..geometry import Geometry
from . import masks
from .cache import ENTRY_OVERHEAD, CacheEntry, ChunkCache, Fetched, unshared
from .pieces import copy_into
from .records import Applied, FetchStart, WriteSnapshot


class ArrayCache:
    def __init__(self, cache: ChunkCache, owner: int, read_chunk: ChunkSpec) -> None:
        self.mount = cache
        self.owner = owner
        self._lock = cache.lock
        self._read_chunk = read_chunk
        # Every missing chunk reads as this one: one element seen through zero strides, so an
        # opened array costs no chunk-sized memory (a mount may open thousands).
        self._fill = np.frombuffer(read_chunk.fill_value, dtype=read_chunk.data_type.storage)
        self._fill_chunk = np.broadcast_to(self._fill.reshape((1,) * len(read_chunk.shape)), read_chunk.shape)
        self._loading: dict[Index, Future[CacheEntry]] = {}
        self._dirty_bytes = 0
        self._mutations = 0
        self._drops = 0  # times entries were dropped as stale (FetchStart)

    @property
    def fill_chunk(self) -> np.ndarray:
        """A read-only chunk of the fill value (what a chunk not stored reads as)."""
        return self._fill_chunk

    @property
    def fill_element(self) -> np.generic:
        return self._fill[0]  # type: ignore[no-any-return]

    @property
    def dirty_bytes(self) -> int:
        return self._dirty_bytes

    @property
    def mutations(self) -> int:
        return self._mutations

    def changed(self) -> None:
        """Elements changed outside the cache (in the store, or the shape): streams are stale."""
        with self._lock:
            self._mutations += 1

    # -- loads ---------------------------------------------------------------------------------

    def start_loads(self, units: Iterable[Index]) -> tuple[dict[Index, Future[CacheEntry]], list[Index]]:
        """The loads of those of `units` not cached whole, joined or begun: their futures, and
        the units whose loads begin here (the caller runs each and settles its future, or
        calls `load_failed`)."""
        started: dict[Index, Future[CacheEntry]] = {}
        begun: list[Index] = []
        with self._lock:
            for unit in units:
                entry = self.mount.entries.get((self.owner, unit))
                if entry is not None and entry.complete:
                    continue
                future = self._loading.get(unit)
                if future is None:
                    future = self._loading[unit] = Future()
                    begun.append(unit)
                started[unit] = future
        return started, begun

    def load_failed(self, unit: Index) -> None:
        """A load begun by `start_loads` ended without installing the chunk."""
        with self._lock:
            self._loading.pop(unit, None)

    def complete(self, unit: Index) -> CacheEntry | None:
        """The entry of a read chunk whose every element is known (now the most recent)."""
        key = (self.owner, unit)
        with self._lock:
            entry = self.mount.entries.get(key)
            if entry is None or not entry.complete:
                return None
            self.mount.entries.move_to_end(key)
            return entry

    def lend(self, entry: CacheEntry) -> np.ndarray | None:
        """An entry's data for a reader to use outside the lock; None once its buffer went to
        another chunk (look again)."""
        with self._lock:
            if entry.retired:
                return None
            entry.lent = True
            return entry.data

    def fetch_begins(self, unit: Index) -> FetchStart:
        """What `install` needs to know of the cache as a fetch of the read chunk begins."""
        with self._lock:
            entry = self.mount.entries.get((self.owner, unit))
            return FetchStart(entry is not None, self._drops, entry is not None and entry.dirty)

    def install(self, unit: Index, fetched: Fetched, start: FetchStart) -> CacheEntry | None:
        """Put a freshly decoded chunk in the cache, merging writes made meanwhile; None when
        what was fetched may be older than what the store holds now (fetch it again): the
        cache's entry for it, there as the fetch began, is gone (this mount wrote it back and
        it was evicted), or a recheck dropped chunks another writer changed (or a resize
        dropped them all). Once installed, the chunk's load has ended, and the cache is
        trimmed to its limit."""
        with self._lock:
            entry = self._installed(unit, fetched, start)
            if entry is not None:
                self._loading.pop(unit, None)
        if entry is not None:
            self.mount.evict()
        return entry

    def install_lent(self, unit: Index, fetched: Fetched, start: FetchStart) -> np.ndarray | None:
        """As `install`, for a reader that began no load; the chunk's data, lent to it."""
        with self._lock:
            entry = self._installed(unit, fetched, start)
            if entry is not None:
                entry.lent = True
        if entry is None:
            return None
        self.mount.evict()
        return entry.data

    def _installed(self, unit: Index, fetched: Fetched, start: FetchStart) -> CacheEntry | None:
        entry = self.mount.entries.get((self.owner, unit))
        if entry is not None and entry.complete:
            return entry  # a writer replaced the whole chunk while we read it
        if start.drops != self._drops or (entry is None and start.held):
            return None
        stored = fetched.data
        if entry is None:
            data = self._fill_chunk if stored is None else np.asarray(stored, order="C")
            # A missing chunk shares the fill chunk; its entry still costs a little.
            entry = CacheEntry(data, ENTRY_OVERHEAD if stored is None else data.nbytes,
                               base=fetched.generation)
            self.mount.add((self.owner, unit), entry)
            return entry
        self._merge(entry, fetched)
        return entry

    def merge_stored(self, unit: Index, fetched: Fetched) -> None:
        """Rebase a cached chunk on a stored version: the elements this mount wrote and has
        not saved win over what the store holds."""
        with self._lock:
            self._merge(self.mount.entries[(self.owner, unit)], fetched)

    def _merge(self, entry: CacheEntry, fetched: Fetched) -> None:
        stored = fetched.data
        merged = self._read_chunk.fill_array() if stored is None else np.array(stored, order="C")
        if entry.written is not None:
            np.copyto(merged, entry.data, where=entry.written)
        entry.loaded = True
        entry.base = fetched.generation
        self._replace_data(entry, merged)

    def lend_cached(self, units: Sequence[Index]) -> tuple[list[tuple[Index, np.ndarray]], set[Index]]:
        """The data of those of `units` cached whole (lent), and those cached partly written."""
        cached: list[tuple[Index, np.ndarray]] = []
        partly_written: set[Index] = set()
        with self._lock:
            for unit in units:
                entry = self.mount.entries.get((self.owner, unit))
                if entry is not None and entry.complete:
                    entry.lent = True
                    cached.append((unit, entry.data))
                elif entry is not None:
                    partly_written.add(unit)
        return cached, partly_written

    def lend_written(self, wanted: dict[Index, list[tuple[slice, ...]]]) -> dict[Index, np.ndarray]:
        """The data (lent) of those chunks of `wanted` cached partly written whose elements
        `wanted[unit]` this mount wrote every one of and has not saved yet: a read of only
        those needs no stored chunk (bytes just written read back during a partition)."""
        shape = self._read_chunk.shape
        lent: dict[Index, np.ndarray] = {}
        with self._lock:
            for unit, selections in wanted.items():
                entry = self.mount.entries.get((self.owner, unit))
                if entry is None or entry.complete or entry.written is None:
                    continue
                if all(masks.covers(entry.written, selection, shape) for selection in selections):
                    entry.lent = True
                    lent[unit] = entry.data
        return lent

    def missing(self, units: Sequence[Index]) -> list[Index]:
        """Those of `units` not cached whole."""
        with self._lock:
            entries = [self.mount.entries.get((self.owner, unit)) for unit in units]
        return [unit for unit, entry in zip(units, entries, strict=True)
                if entry is None or not entry.complete]

    # -- writes --------------------------------------------------------------------------------

    def write(self, geometry: Geometry, pieces: Sequence[Piece], values: Sequence[np.ndarray]) -> Applied:
        """Write each piece's values (`pieces.by_piece`) into its chunk, in order, under one hold
        of the lock, not one per piece (a 1 MiB request of `data` is 32 pieces: a thread storing
        chunks that took the lock between two made the writer wait for it, and for the
        interpreter lock after). Stops before a piece whose chunk is being loaded: wait for
        the load, then write the rest."""
        whole: list[Index] = []
        with self._lock:
            for done, (piece, piece_values) in enumerate(zip(pieces, values, strict=True)):
                pending = self._loading.get(piece.cell)
                if pending is not None:
                    return Applied(done, whole, pending)
                if self._write_piece(geometry, piece.cell, piece.in_cell, piece_values):
                    whole.append(piece.cell)
        return Applied(len(pieces), whole, None)

    def _write_piece(self, geometry: Geometry, unit: Index, in_cell: tuple[slice, ...],
                     values: np.ndarray) -> bool:
        """Write into a chunk (lock held); whether that made it whole (all written, none read)."""
        key = (self.owner, unit)
        entry = self.mount.entries.get(key)
        if entry is None:
            entry = self._new_entry(geometry, unit)
        self.mount.entries.move_to_end(key)
        if (entry.lent and not unshared(entry.data, 1)) or not entry.data.flags.writeable:
            self._replace_data(entry, np.array(entry.data, order="C"))
        copy_into(entry.data, in_cell, values)
        became_whole = self._mark_written(entry, geometry.within_array(unit, in_cell))
        geometry.clear_overhang(unit, entry.data, self._fill[0])
        if not entry.dirty:
            self._count_dirty(entry.nbytes)
        entry.version += 1
        self._mutations += 1
        return became_whole

    def _new_entry(self, geometry: Geometry, unit: Index) -> CacheEntry:
        """A chunk about to be written without reading it: no elements known until they are
        written (the others are never used: merged from the store first). The overhang is
        not counted: what a write puts there is dropped (`Geometry.within_array`)."""
        entry = CacheEntry(self._fill_chunk, 0, loaded=False, unwritten=math.prod(geometry.inside(unit)))
        self.mount.add((self.owner, unit), entry)
        self._replace_data(entry, self.mount.buffer_for(self._read_chunk.shape, self._fill.dtype))
        return entry

    def _mark_written(self, entry: CacheEntry, in_cell: tuple[slice, ...]) -> bool:
        """Record written elements: to merge them with the stored chunk when it is read, and
        again if another writer changes it before they are saved. Whether this write made
        the chunk whole."""
        if entry.whole:
            return False
        mask, fresh = masks.mark(entry.written, in_cell, self._read_chunk.shape)
        if mask is not entry.written:
            entry.written = mask
            self._recount(entry)
        if not entry.loaded:  # once all are written the stored chunk is never needed
            entry.unwritten -= fresh
        if not entry.whole:
            return False
        entry.written = None
        self._recount(entry)
        return True

    def _replace_data(self, entry: CacheEntry, data: np.ndarray) -> None:
        """Give an entry new data (a private copy, or the merged chunk) and recount its cost."""
        self.mount.freed_bytes += 0 if entry.data is self._fill_chunk else entry.data.nbytes
        entry.data = data
        entry.lent = False
        self._mutations += 1
        self._recount(entry)

    def _recount(self, entry: CacheEntry) -> None:
        """What an entry costs the cache: its data and its written-mask."""
        held = ENTRY_OVERHEAD if entry.data is self._fill_chunk else entry.data.nbytes
        nbytes = held + (0 if entry.written is None else entry.written.nbytes)
        self.mount.total_bytes += nbytes - entry.nbytes
        if entry.dirty:
            self._count_dirty(nbytes - entry.nbytes)
        entry.nbytes = nbytes

    def _count_dirty(self, delta: int) -> None:
        self._dirty_bytes += delta
        self.mount.dirty_bytes += delta

    # -- write-back (zarrfs.array.writes.writeback) --------------------------------------------

    def dirty_units(self, *, complete_only: bool = False, most: int | None = None) -> list[Index]:
        """The array's dirty read chunks (with `complete_only`, those needing nothing read);
        with `most`, the least recently used first, only until they hold `most` bytes."""
        with self._lock:
            found = ([(k[1], e) for k, e in self.mount.entries.items() if k[0] == self.owner]
                     if most is not None else
                     [(u, self.mount.entries[(self.owner, u)]) for u in self.mount.units_of(self.owner)])
        chosen = [(u, e) for u, e in found if e.dirty and (e.complete or not complete_only)]
        before = [0, *itertools.accumulate(e.nbytes for _, e in chosen)]
        return [u for (u, _), held in zip(chosen, before, strict=False) if most is None or held < most]

    def dirty_among(self, units: Iterable[Index]) -> list[Index]:
        with self._lock:
            return [u for u in units
                    if (e := self.mount.entries.get((self.owner, u))) is not None and e.dirty]

    def all_whole(self, units: Iterable[Index], *, dirty: bool = False) -> bool:
        """Whether every unit is cached, written whole without being read (and dirty)."""
        with self._lock:
            return all((e := self.mount.entries.get((self.owner, u))) is not None and e.whole
                       and (e.dirty or not dirty) for u in units)

    def incomplete(self, units: Iterable[Index]) -> list[Index]:
        """Those of the (dirty, so cached) units still to be merged with the stored chunk."""
        with self._lock:
            return [u for u in units if not self.mount.entries[(self.owner, u)].complete]

    def read_from_other(self, units: Iterable[Index], generation: str | None) -> list[Index]:
        """Those of the (dirty) units read from a version other than `generation`."""
        with self._lock:
            found = [(u, self.mount.entries[(self.owner, u)]) for u in units]
        return [u for u, e in found if e.loaded and e.base != generation]

    def lend_whole(self, unit: Index, fits: Callable[[int], bool]) -> tuple[np.ndarray, int, int] | None:
        """A chunk written whole whose cost `fits`, lent (to encode it ahead): its data,
        version and cost."""
        with self._lock:
            entry = self.mount.entries.get((self.owner, unit))
            if entry is None or not entry.whole or not fits(entry.nbytes):
                return None
            entry.lent = True
            return entry.data, entry.version, entry.nbytes

    def take(self, units: Iterable[Index]) -> WriteSnapshot:
        """The data of chunks about to be written back, their written-masks handed over, and
        counted against the cache until stored or given back (a flush holds them to its end)."""
        with self._lock:
            snapshot = WriteSnapshot.of({unit: self.mount.entries[(self.owner, unit)] for unit in units})
            for entry in snapshot.entries.values():
                entry.written, entry.lent = None, True
                self._recount(entry)
            self.mount.total_bytes += snapshot.held
        self.mount.evict()
        return snapshot

    def give_back(self, snapshot: WriteSnapshot) -> None:
        """A failed attempt: the masks taken return to their entries, with writes made since."""
        with self._lock:
            for unit, entry in snapshot.entries.items():
                taken = snapshot.masks[unit]
                if taken is None or taken is entry.written:
                    continue
                entry.written = taken if entry.written is None else (taken | entry.written)
                self._recount(entry)
            self.mount.release(snapshot.let_go())

    def settle(self, snapshot: WriteSnapshot, generation: str | None) -> None:
        """The snapshot was stored as `generation`: what was not written since is clean."""
        with self._lock:
            self.mount.release(snapshot.let_go())
            for unit, entry in snapshot.entries.items():
                saved = entry.version == snapshot.versions[unit]  # else written meanwhile: still dirty
                # A chunk written whole stays wholly this mount's while writes to it are
                # unsaved: they have no written-mask, so it must not be merged with a stored
                # version.
                entry.loaded = saved or not entry.whole
                entry.base = generation
                if saved:
                    self._count_dirty(-entry.nbytes)
                    self.mount.reusable.append((self.owner, unit))
                entry.saved_version = snapshot.versions[unit]

    # -- forgetting ----------------------------------------------------------------------------

    def drop_clean(self, stale: Callable[[Index], bool]) -> None:
        """Drop the clean chunks `stale` picks (another writer changed them): streams of what
        the store held are stale too."""
        with self._lock:
            for unit in self.mount.units_of(self.owner):
                if stale(unit) and not self.mount.entries[(self.owner, unit)].dirty:
                    self.mount.remove((self.owner, unit))
            self._mutations += 1
            self._drops += 1

    def drop_all(self) -> None:
        """Forget every chunk (the array closes, or changes shape: its dirty data was
        flushed, or is given up)."""
        with self._lock:
            for unit in self.mount.units_of(self.owner):
                entry = self.mount.remove((self.owner, unit))
                if entry.dirty:
                    self._count_dirty(-entry.nbytes)
            self._mutations += 1
            self._drops += 1
