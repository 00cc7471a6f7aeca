"""Read and write regions of an array over its chunk grid.

The unit of caching is the *read chunk*: the chunk itself, or the inner chunk when the
array's codec is `sharding_indexed`, so a read fetches only the shard index (cached) and the
inner chunks it touches. The unit of storing is the *write chunk* (the chunk or shard).

Concurrency: every method is thread-safe. Loads run on the mount's worker threads,
deduplicated (two readers of one chunk wait on one decode). Writes go into cached chunks; a
partial write to a chunk that is not cached does not read it: the chunk records which
elements were written and is merged with the stored one only when it is read or written back.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from ..codecs import ChunkSpec, CodecError, Pipeline
from ..errors import ChunkError, ReadOnlyError
from ..formats import ArrayDescription
from ..grid import Box, Index, Piece, cells_of, extent_inside
from ..store import Store
from . import masks, writeback
from . import resize as resizing
from .cache import DEFAULT_CACHE_BYTES, ENTRY_OVERHEAD, Entry, Shared
from .chunk_io import Fetched, PlainChunkIO, ShardedChunkIO, Stats, partial_read_sharding
from .recheck import Changes, Seen, recheck
from .streaming import Stream

log = logging.getLogger(__name__)


class ZarrArray:
    def __init__(
        self,
        store: Store,
        description: ArrayDescription,
        raw_metadata: bytes = b"",
        *,
        cache_bytes: int | None = None,
        threads: int | None = None,
        shared: Shared | None = None,
    ) -> None:
        self._owns_shared = shared is None
        self.shared = shared or Shared(DEFAULT_CACHE_BYTES if cache_bytes is None else cache_bytes, threads)
        self.cache = self.shared.cache
        self._lock = self.cache.lock
        self.owner = self.shared.register(self)
        self.store = store
        self.metadata = description
        self.raw_metadata = raw_metadata
        self.data_type = description.data_type
        self.shape = description.shape
        self.chunk_shape = description.chunk_shape
        self.grid_shape = description.grid_shape
        self.pipeline = Pipeline.build(description.codecs, ChunkSpec(
            description.chunk_shape, description.data_type, description.fill_value))
        self.sharding = partial_read_sharding(self.pipeline)
        self.stats = Stats()
        self.seen = Seen()
        self.io: PlainChunkIO
        if self.sharding is None:
            self.io = PlainChunkIO(store, self.pipeline, description.fill_value, self.stats,
                                   self.shared.counters)
        else:
            self.io = ShardedChunkIO(store, self.pipeline, self.sharding, self.cache, self.owner, self.stats,
                                     self.shared.counters, self.shared.loaders)
        self.read_chunk_shape = self.sharding.inner_shape if self.sharding else self.chunk_shape
        self.read_chunk = ChunkSpec(self.read_chunk_shape, description.data_type, description.fill_value)
        # Every missing chunk reads as this one: one element seen through zero strides, so an
        # opened array costs no chunk-sized memory (a mount may open thousands).
        self._fill_element = np.frombuffer(description.fill_value, dtype=description.data_type.storage)
        self._fill_chunk = np.broadcast_to(self._fill_element.reshape((1,) * len(self.read_chunk_shape)),
                                           self.read_chunk_shape)
        self._loading: dict[Index, Future[Entry]] = {}
        self.mutations = 0  # bumped (under the lock) after any element changes: see .streaming
        self._dirty_bytes = 0
        self._flush_lock = threading.Lock()
        self.early = writeback.Early()
        self._flush_lock_for_resize = threading.Lock()  # one resize at a time
        shard_bytes = math.prod(description.chunk_shape) * description.data_type.itemsize
        self.write_slots = writeback.WriteSlots(self.shared.writer_count, self.cache.capacity,
                                                shard_bytes if self.sharding else None)

    @classmethod
    def open(cls, store: Store, **options: Any) -> ZarrArray:
        """The array at the root of `store`, whatever its format (tests and commands)."""
        from ..errors import MetadataError
        from ..formats import discover

        node = discover(store.get, "")
        if node is None:
            raise MetadataError("zarr.json", f"not found in {store.path('')!r} (nor .zarray or meta)")
        raw = node.raw.get(node.files[0], b"")
        return cls(store, node.describe(), raw, **options)

    @classmethod
    def create(cls, store: Store, description: ArrayDescription, **options: Any) -> ZarrArray:
        """A new Zarr v3 array."""
        import json

        raw = json.dumps(description.to_json(), indent=2).encode() + b"\n"
        Pipeline.build(description.codecs, ChunkSpec(description.chunk_shape, description.data_type,
                                                     description.fill_value))  # refuse before writing
        store.put("zarr.json", raw)
        return cls(store, description, raw, **options)

    def close(self) -> None:
        self.shared.unregister(self.owner)
        if self._owns_shared:
            self.shared.close()

    # -- geometry ----------------------------------------------------------------------------

    @property
    def read_only(self) -> bool:
        return self.store.read_only

    @property
    def extended_shape(self) -> Index:
        """The shape of the whole chunk grid, edge chunks included."""
        return tuple(g * c for g, c in zip(self.grid_shape, self.chunk_shape, strict=True))

    def chunk_key(self, chunk: Sequence[int]) -> str:
        return self.metadata.chunk_key_encoding.key(chunk)

    def _key(self, unit: Index) -> tuple[int, Index]:
        return (self.owner, unit)

    # -- reading -----------------------------------------------------------------------------

    def read(self, box: Box) -> np.ndarray:
        """The elements of `box` (array coordinates, edge chunks' overhang allowed); a
        read-only view into the cache when the box lies in one chunk."""
        return self.read_boxes([box])[0]

    def read_boxes(self, boxes: Sequence[Box]) -> list[np.ndarray]:
        """The elements of each box, all taken from one version of every chunk they touch:
        a reply made of several boxes never mixes two versions of a chunk."""
        pieces = [list(cells_of(box, self.read_chunk_shape)) for box in boxes]
        units = list(dict.fromkeys(piece.cell for found in pieces for piece in found))
        futures = self._start_loads(units)
        self.shared.counters.add(cache_hits=len(units) - len(futures), cache_misses=len(futures))
        lent = {unit: self._lend(unit, futures) for unit in units}
        return [self._assemble(box, found, lent) for box, found in zip(boxes, pieces, strict=True)]

    def _assemble(self, box: Box, pieces: list[Piece], lent: dict[Index, np.ndarray]) -> np.ndarray:
        if len(pieces) == 1:
            # The trailing Ellipsis keeps a rank-0 result an array, not a scalar.
            selection: tuple[Any, ...] = (*pieces[0].in_cell, Ellipsis)
            view: np.ndarray = lent[pieces[0].cell][selection]
            view.flags.writeable = False  # a view of the cache: writes must go through write()
            return view
        out = np.empty(box.shape, dtype=self.data_type.storage)
        for piece in pieces:
            out[piece.in_box] = lent[piece.cell][piece.in_cell]
        return out

    def _lend(self, unit: Index, futures: dict[Index, Future[Entry]]) -> np.ndarray:
        """A read chunk's data for a reader to use outside the lock: writers leave it as it is
        (they copy first), so a reader never sees half of a write."""
        entry = self._wait(unit, futures)
        while True:
            with self._lock:
                if not entry.retired:
                    entry.lent = True
                    return entry.data
            entry = self._wait(unit, {})  # its buffer went to a new chunk: look again

    def prefetch(self, box: Box) -> None:
        """Start loading the chunks of `box` in the background."""
        self._start_loads(piece.cell for piece in cells_of(box, self.read_chunk_shape))

    def stream(self, box: Box) -> Stream | None:
        """Start filling a buffer with `box` (zarrfs.array.streaming); None: no room for it."""
        return Stream.start(self, box)

    def _start_loads(self, units: Iterable[Index]) -> dict[Index, Future[Entry]]:
        started: dict[Index, Future[Entry]] = {}
        with self._lock:
            for unit in units:
                entry = self.cache.entries.get(self._key(unit))
                if entry is not None and entry.complete:
                    continue
                future = self._loading.get(unit)
                if future is None:
                    future = self.shared.loaders.submit(self._load, unit)
                    self._loading[unit] = future
                started[unit] = future
        return started

    def _wait(self, unit: Index, futures: dict[Index, Future[Entry]]) -> Entry:
        """The complete cached entry of a read chunk, loading or merging it as needed."""
        future = futures.get(unit)
        if future is not None:
            return future.result()
        while True:
            with self._lock:
                entry = self.cache.entries.get(self._key(unit))
                if entry is not None and entry.complete:
                    self.cache.entries.move_to_end(self._key(unit))
                    return entry
            # Another thread may finish the load in between: then nothing is started.
            started = self._start_loads([unit])
            if unit in started:
                return started[unit].result()

    def _load(self, unit: Index) -> Entry:
        """Decode a read chunk from the store into the cache (worker thread)."""
        try:
            (fetched,) = self.fetch([unit])
            with self._lock:
                entry = self._install(unit, fetched)
        finally:
            with self._lock:
                self._loading.pop(unit, None)
        self.cache.evict()
        return entry

    def _install(self, unit: Index, fetched: Fetched) -> Entry:
        """Put a freshly decoded chunk in the cache, merging writes made meanwhile."""
        entry = self.cache.entries.get(self._key(unit))
        if entry is not None and entry.complete:
            return entry  # a writer replaced the whole chunk while we read it
        stored = fetched.data
        if entry is None:
            data = self._fill_chunk if stored is None else np.asarray(stored, order="C")
            # A missing chunk shares the fill chunk; its entry still costs a little.
            entry = Entry(data, ENTRY_OVERHEAD if stored is None else data.nbytes, base=fetched.generation)
            self.cache.entries[self._key(unit)] = entry
            self.cache.total_bytes += entry.nbytes
            return entry
        self.merge_stored(entry, fetched)
        return entry

    def merge_stored(self, entry: Entry, fetched: Fetched) -> None:
        """Rebase an entry on a stored version: the elements this mount wrote and has not
        saved win over what the store holds."""
        stored = fetched.data
        merged = self.read_chunk.fill_array() if stored is None else np.array(stored, order="C")
        if entry.written is not None:
            np.copyto(merged, entry.data, where=entry.written)
        entry.loaded = True
        entry.base = fetched.generation
        self._replace_data(entry, merged)

    def fetch(self, units: Sequence[Index]) -> Iterator[Fetched]:
        """Read chunks of one stored object (a chunk, or inner chunks of one shard, read
        together) as stored now: decoded (None: not stored, all fill), and the generation."""
        chunk = self.io.location(units[0])[0]
        key = self.chunk_key(chunk)
        try:
            run = self.io.fetch_run(key, chunk, [self.io.location(unit)[1] for unit in units])
            for unit, fetched in zip(units, run, strict=True):
                if fetched.data is not None and self._is_edge(unit):
                    # Outside the array: the fill value, whatever a writer left (v1, v2: undefined).
                    fetched.data = np.array(fetched.data, order="C")
                    self._clear_overhang(unit, fetched.data)
                self.seen.note(chunk, fetched.generation)
                yield fetched
        except CodecError as e:
            log.error("corrupt chunk %r: %s", self.store.path(key), e)
            raise ChunkError(key, str(e)) from None

    # -- writing -----------------------------------------------------------------------------

    def write(self, box: Box, values: np.ndarray) -> None:
        """Set the elements of `box` (values in the storage dtype, shaped like the box)."""
        if self.read_only:
            raise ReadOnlyError("the array is read-only")
        writeback.make_room(self)
        whole = [piece.cell for piece in cells_of(box, self.read_chunk_shape)
                 if self._write_piece(piece, values[piece.in_box])]
        self.cache.evict()
        if whole:
            writeback.store_early(self, whole)

    def _write_piece(self, piece: Piece, values: np.ndarray) -> bool:
        """Whether the write made the chunk whole: all of it written, none of it read."""
        unit, in_cell = piece.cell, piece.in_cell
        while True:
            with self._lock:
                pending = self._loading.get(unit)
                if pending is None:
                    entry = self.cache.entries.get(self._key(unit))
                    if entry is None:
                        entry = self._new_entry(unit)
                    self.cache.entries.move_to_end(self._key(unit))
                    if entry.lent or not entry.data.flags.writeable:
                        self._replace_data(entry, np.array(entry.data, order="C"))
                    entry.data[in_cell] = values
                    became_whole = self._mark_written(entry, in_cell)
                    self._clear_overhang(unit, entry.data)
                    if not entry.dirty:
                        self._count_dirty(entry.nbytes)
                    entry.version += 1
                    self.mutations += 1
                    break
            pending.result()  # let a load in flight finish first, then write into its result
        return became_whole

    def _mark_written(self, entry: Entry, in_cell: tuple[slice, ...]) -> bool:
        """Record written elements: to merge them with the stored chunk when it is read, and
        again if another writer changes it before they are saved. Whether this write made
        the chunk whole."""
        if entry.whole:
            return False
        mask, fresh = masks.mark(entry.written, in_cell, self.read_chunk_shape)
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

    def _new_entry(self, unit: Index) -> Entry:
        """A chunk about to be written without reading it: no elements known until they are
        written (the others are never used: merged from the store first). The overhang is
        not counted, as no write reaches it."""
        inside = math.prod(extent_inside(unit, self.read_chunk_shape, self.shape))
        entry = Entry(self._fill_chunk, 0, loaded=False, unwritten=inside)
        self.cache.entries[self._key(unit)] = entry
        self._replace_data(entry, self.cache.buffer_for(self.read_chunk_shape, self.data_type.storage))
        return entry

    def _clear_overhang(self, unit: Index, data: np.ndarray) -> None:
        """Elements of an edge chunk outside the array hold the fill value."""
        if not self._is_edge(unit):
            return
        inside = extent_inside(unit, self.read_chunk_shape, self.shape)
        for d, (extent, c) in enumerate(zip(inside, self.read_chunk_shape, strict=True)):
            if extent < c:
                data[(slice(None),) * d + (slice(extent, None),)] = self._fill_element[0]

    def _is_edge(self, unit: Index) -> bool:
        return any((u + 1) * c > n for u, c, n in zip(unit, self.read_chunk_shape, self.shape, strict=True))

    def _replace_data(self, entry: Entry, data: np.ndarray) -> None:
        """Give an entry new data (a private copy, or the merged chunk) and recount its cost."""
        entry.data = data
        entry.lent = False
        self.mutations += 1
        self._recount(entry)

    def _recount(self, entry: Entry) -> None:
        """What an entry costs the cache: its data and its written-mask."""
        held = ENTRY_OVERHEAD if entry.data is self._fill_chunk else entry.data.nbytes
        nbytes = held + (0 if entry.written is None else entry.written.nbytes)
        self.cache.total_bytes += nbytes - entry.nbytes
        if entry.dirty:
            self._count_dirty(nbytes - entry.nbytes)
        entry.nbytes = nbytes

    def recheck(self, chunks: Iterable[Index] | None = None) -> Changes:
        """What other writers changed (zarrfs.array.recheck); stale cached chunks are dropped."""
        return recheck(self, chunks)

    def adopt_shape(self, shape: tuple[int, ...], raw_metadata: bytes) -> None:
        """Another writer resized the array: take its shape (nothing stored changes)."""
        with self._flush_lock_for_resize:
            resizing.adopt(self, shape, raw_metadata)

    def resize(self, shape: tuple[int, ...]) -> None:
        """Give the array a new shape (zarrfs.array.resize); ResizeError when it cannot."""
        with self._flush_lock_for_resize:
            resizing.resize(self, shape)

    # -- write-back (zarrfs.array.writeback) ---------------------------------------------------

    @property
    def dirty_bytes(self) -> int:
        return self._dirty_bytes

    def flush(self) -> None:
        """Write every dirty chunk to the store. On failure the data stays dirty for a retry."""
        writeback.flush(self)

    def _count_dirty(self, delta: int) -> None:
        self._dirty_bytes += delta
        self.cache.dirty_bytes += delta

    # -- information -------------------------------------------------------------------------

    def stored_chunk_count(self) -> int:
        """How many chunk (or shard) objects the store holds."""
        encoding = self.metadata.chunk_key_encoding
        return sum(1 for key in self.store.list() if encoding.parse(key, len(self.shape)) is not None)
