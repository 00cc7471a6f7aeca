"""Read and write regions of a Zarr v3 array over the chunk grid.

The unit of caching is the *read chunk*: the chunk itself, or the inner chunk when the
array's codec is `sharding_indexed`, so a read fetches only the shard index (cached) and the
inner chunks it touches. The unit of storing is the *write chunk* (the chunk or shard).

Concurrency: every method is thread-safe. Loads run on a small thread pool, deduplicated
(two readers of one chunk wait on one decode). Writes go into cached chunks; a partial write
to a chunk that is not cached does not read it: the chunk records which elements were written
and is merged with the stored one only when it is read or written back. `flush` writes dirty
chunks back; shards are rebuilt keeping the encoded bytes of inner chunks that did not change.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .codecs import BytesLike, ChunkSpec, CodecError, Pipeline, ShardIndex, ShardingCodec, is_fill
from .errors import ChunkError, MetadataError, ReadOnlyError
from .grid import Box, Index, Piece, cells_of
from .metadata import ArrayMetadata, parse_metadata
from .store import ByteRange, Store

log = logging.getLogger(__name__)

DEFAULT_CACHE_BYTES = 256 << 20
_ENTRY_OVERHEAD = 512
METADATA_KEY = "zarr.json"


@dataclass
class _Entry:
    """A decoded read chunk in the cache."""

    data: np.ndarray
    nbytes: int  # what it costs the cache (0 for the shared fill chunk)
    version: int = 0  # bumped by every write
    saved_version: int = 0  # the version known to be in the store
    written: np.ndarray | None = None  # which elements were written before the chunk was read
    unwritten: int = 0  # how many elements of `written` are still False
    flushing: bool = False  # a write-back holds `data`; writers copy before changing it

    @property
    def dirty(self) -> bool:
        return self.version != self.saved_version


@dataclass
class _Stats:
    """Counters for tests and benchmarks."""

    loads: int = 0
    bytes_fetched: int = 0
    chunks_written: int = 0
    chunks_deleted: int = 0
    extra: dict[str, int] = field(default_factory=dict)


class ZarrArray:
    def __init__(
        self,
        store: Store,
        metadata: ArrayMetadata,
        raw_metadata: bytes,
        *,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        threads: int | None = None,
    ) -> None:
        self.store = store
        self.metadata = metadata
        self.raw_metadata = raw_metadata
        self.data_type = metadata.data_type
        self.shape = metadata.shape
        self.chunk_shape = metadata.chunk_shape
        self.grid_shape = metadata.grid_shape
        self.cache_bytes = cache_bytes
        chunk = ChunkSpec(metadata.chunk_shape, metadata.data_type, metadata.fill_value)
        self.pipeline = Pipeline.build(metadata.codecs, chunk)
        self.sharding = _partial_read_sharding(self.pipeline)
        self.read_chunk_shape = self.sharding.inner_shape if self.sharding else self.chunk_shape
        self.read_chunk = ChunkSpec(self.read_chunk_shape, metadata.data_type, metadata.fill_value)
        self._fill_chunk = self.read_chunk.fill_array()
        self._fill_chunk.flags.writeable = False
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._cache: OrderedDict[Index, _Entry] = OrderedDict()
        self._total_bytes = 0  # what all cached entries cost
        self._dirty_bytes = 0  # what the dirty ones cost
        self._loading: dict[Index, Future[_Entry]] = {}
        self._indexes: OrderedDict[Index, ShardIndex | None] = OrderedDict()
        self._index_bytes = 0
        self._index_budget = max(cache_bytes // 8, 1 << 20)
        # Striped locks: one index fetch per shard at a time, in constant memory.
        self._index_locks = [threading.Lock() for _ in range(64)]
        # A partial read that saw a shard rewrite start or end while it read retries.
        self._rewrites_running = 0
        self._rewrite_generation = 0
        self._pool = ThreadPoolExecutor(threads or os.cpu_count() or 2, "zarrfs-decode")
        # Write-back encodes (GIL-free in the compressors) and waits on fsync: more threads,
        # but only as many shard rebuilds at once as half the cache holds (each holds the old
        # shard, its new inner chunks and the new shard).
        writers = 4 * (threads or os.cpu_count() or 2) + 4
        self._writers = ThreadPoolExecutor(writers, "zarrfs-write")
        rebuild_cost = 3 * math.prod(metadata.chunk_shape) * metadata.data_type.itemsize
        self._write_slots = threading.BoundedSemaphore(
            max(1, min(writers, cache_bytes // 2 // rebuild_cost)) if self.sharding else writers
        )
        self.stats = _Stats()

    # -- opening and creating ----------------------------------------------------------------

    @classmethod
    def open(cls, store: Store, **options: int | None) -> ZarrArray:
        raw = store.get(METADATA_KEY)
        if raw is None:
            raise MetadataError("zarr.json", f"not found in {store.path('')!r}")
        return cls(store, parse_metadata(raw), raw, **options)  # type: ignore[arg-type]

    @classmethod
    def create(cls, store: Store, metadata: ArrayMetadata, **options: int | None) -> ZarrArray:
        raw = json.dumps(metadata.to_json(), indent=2).encode() + b"\n"
        Pipeline.build(metadata.codecs, ChunkSpec(metadata.chunk_shape, metadata.data_type,
                                                  metadata.fill_value))  # refuse before writing
        store.put(METADATA_KEY, raw)
        return cls(store, metadata, raw, **options)  # type: ignore[arg-type]

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._writers.shutdown(wait=True)

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

    def chunk_box(self, chunk: Sequence[int]) -> Box:
        start = tuple(i * c for i, c in zip(chunk, self.chunk_shape, strict=True))
        return Box(start, tuple(s + c for s, c in zip(start, self.chunk_shape, strict=True)))

    def _location(self, unit: Index) -> tuple[Index, Index | None]:
        """The write chunk holding a read chunk, and its inner index when sharded."""
        if self.sharding is None:
            return unit, None
        per = self.sharding.chunks_per_shard
        return (
            tuple(u // p for u, p in zip(unit, per, strict=True)),
            tuple(u % p for u, p in zip(unit, per, strict=True)),
        )

    # -- reading -----------------------------------------------------------------------------

    def read(self, box: Box) -> np.ndarray:
        """The elements of `box` (array coordinates, edge chunks' overhang allowed).

        May be a read-only view into the cache when the box lies in one chunk."""
        pieces = list(cells_of(box, self.read_chunk_shape))
        futures = self._start_loads(piece.cell for piece in pieces)
        if len(pieces) == 1:
            # The trailing Ellipsis keeps a rank-0 result an array, not a scalar.
            selection: tuple[Any, ...] = (*pieces[0].in_cell, Ellipsis)
            view: np.ndarray = self._wait(pieces[0].cell, futures).data[selection]
            view.flags.writeable = False  # a view of the cache: writes must go through write()
            return view
        out = np.empty(box.shape, dtype=self.data_type.storage)
        for piece in pieces:
            out[piece.in_box] = self._wait(piece.cell, futures).data[piece.in_cell]
        return out

    def prefetch(self, box: Box) -> None:
        """Start loading the chunks of `box` in the background."""
        self._start_loads(piece.cell for piece in cells_of(box, self.read_chunk_shape))

    def _start_loads(self, units: Iterable[Index]) -> dict[Index, Future[_Entry]]:
        started: dict[Index, Future[_Entry]] = {}
        with self._lock:
            for unit in units:
                entry = self._cache.get(unit)
                if entry is not None and entry.written is None:
                    continue
                future = self._loading.get(unit)
                if future is None:
                    future = self._pool.submit(self._load, unit)
                    self._loading[unit] = future
                started[unit] = future
        return started

    def _wait(self, unit: Index, futures: dict[Index, Future[_Entry]]) -> _Entry:
        """The complete cached entry of a read chunk, loading or merging it as needed."""
        future = futures.get(unit)
        if future is not None:
            return future.result()
        while True:
            with self._lock:
                entry = self._cache.get(unit)
                if entry is not None and entry.written is None:
                    self._cache.move_to_end(unit)
                    return entry
            # Another thread may finish the load in between: then nothing is started.
            started = self._start_loads([unit])
            if unit in started:
                return started[unit].result()

    def _load(self, unit: Index) -> _Entry:
        """Decode a read chunk from the store into the cache (pool thread)."""
        try:
            stored = self._fetch_decoded(unit)
            with self._lock:
                entry = self._install(unit, stored)
        finally:
            with self._lock:
                self._loading.pop(unit, None)
        self._evict()
        return entry

    def _install(self, unit: Index, stored: np.ndarray | None) -> _Entry:
        """Put a freshly decoded chunk in the cache, merging writes made meanwhile."""
        entry = self._cache.get(unit)
        if entry is not None and entry.written is None:
            return entry  # a writer replaced the whole chunk while we read it
        if entry is None:
            data = self._fill_chunk if stored is None else np.asarray(stored, order="C")
            # A missing chunk shares the fill chunk; its entry still costs a little.
            entry = _Entry(data, _ENTRY_OVERHEAD if stored is None else data.nbytes)
            self._cache[unit] = entry
            self._total_bytes += entry.nbytes
            return entry
        # Merge: elements the writers set win over what the store holds.
        assert entry.written is not None
        merged = self.read_chunk.fill_array() if stored is None else np.array(stored, order="C")
        np.copyto(merged, entry.data, where=entry.written)
        entry.written = None
        self._replace_data(entry, merged)
        return entry

    def _fetch_decoded(self, unit: Index) -> np.ndarray | None:
        """A read chunk's decoded contents, or None when it is not stored (all fill)."""
        chunk, inner = self._location(unit)
        key = self.chunk_key(chunk)
        try:
            if inner is None:
                data = self.store.get(key)
                if data is None:
                    return None
                self._count_fetch(len(data))
                return self.pipeline.decode(data)
            return self._fetch_inner(chunk, inner, key)
        except CodecError as e:
            log.error("corrupt chunk %r: %s", key, e)
            raise ChunkError(key, str(e)) from None

    def _fetch_inner(self, chunk: Index, inner: Index, key: str) -> np.ndarray | None:
        assert self.sharding is not None
        while True:
            generation = self._rewrite_generation
            if self._rewrites_running:
                time.sleep(0.001)  # a write-back is replacing a shard
                continue
            index = self._shard_index(chunk, key)
            span = None if index is None else index.span(inner)
            if span is None:
                data = None
            else:
                data = self.store.get(key, ByteRange(span.offset, span.nbytes))
                if data is None or len(data) != span.nbytes:
                    raise CodecError(f"shard is truncated: inner chunk {inner} lies past its end")
                self._count_fetch(len(data))
            if self._rewrite_generation == generation and not self._rewrites_running:
                break  # no write-back replaced the shard while we read it
        return None if data is None else self.sharding.decode_inner(data)

    def _shard_index(self, chunk: Index, key: str) -> ShardIndex | None:
        assert self.sharding is not None
        with self._index_locks[hash(chunk) % len(self._index_locks)]:
            with self._lock:
                if chunk in self._indexes:
                    self._indexes.move_to_end(chunk)
                    return self._indexes[chunk]
            index = self._fetch_index(key)
            self._remember_index(chunk, index)
            return index

    def _fetch_index(self, key: str) -> ShardIndex | None:
        """Read and check a shard's index: its size first, so entries can be bounded by it."""
        assert self.sharding is not None
        shard_nbytes = self.store.size(key)
        if shard_nbytes is None:
            return None
        if shard_nbytes < self.sharding.index_nbytes:
            raise CodecError(f"shard of {shard_nbytes} bytes is shorter than its index")
        span = self.sharding.index_span(shard_nbytes)
        raw = self.store.get(key, ByteRange(span.offset, span.nbytes))
        if raw is None:
            return None  # deleted between the two calls
        self._count_fetch(len(raw))
        return self.sharding.decode_index(raw, shard_nbytes)

    def _remember_index(self, chunk: Index, index: ShardIndex | None) -> None:
        with self._lock:
            old = self._indexes.pop(chunk, None)
            self._index_bytes += _index_cost(index) - _index_cost(old)
            self._indexes[chunk] = index
            while self._index_bytes > self._index_budget and len(self._indexes) > 1:
                _, dropped = self._indexes.popitem(last=False)
                self._index_bytes -= _index_cost(dropped)

    def _count_fetch(self, nbytes: int) -> None:
        with self._lock:
            self.stats.loads += 1
            self.stats.bytes_fetched += nbytes

    # -- writing -----------------------------------------------------------------------------

    def write(self, box: Box, values: np.ndarray) -> None:
        """Set the elements of `box` (values in the storage dtype, shaped like the box)."""
        if self.read_only:
            raise ReadOnlyError("the array is read-only")
        self._make_room()
        for piece in cells_of(box, self.read_chunk_shape):
            self._write_piece(piece, values[piece.in_box])

    def _make_room(self) -> None:
        """Write back before dirty data fills the cache. A write is applied whole or not at all:
        when the store is failing it is refused only once dirty data would exceed the cache."""
        if self._dirty_bytes <= self.cache_bytes // 2:
            return
        try:
            self.flush()
        except (OSError, ChunkError):
            if self._dirty_bytes > self.cache_bytes:
                raise
            log.warning("write-back failed; keeping %d dirty bytes for a retry", self._dirty_bytes)

    def _write_piece(self, piece: Piece, values: np.ndarray) -> None:
        unit, in_cell = piece.cell, piece.in_cell
        while True:
            with self._lock:
                pending = self._loading.get(unit)
                if pending is None:
                    entry = self._cache.get(unit) or self._new_entry(unit, piece.covers_cell)
                    self._cache.move_to_end(unit)
                    if entry.flushing or not entry.data.flags.writeable:
                        self._replace_data(entry, np.array(entry.data, order="C"))
                    entry.data[in_cell] = values
                    if entry.written is not None:
                        self._mark_written(entry, in_cell)
                    self._clear_overhang(unit, entry.data)
                    if not entry.dirty:
                        self._dirty_bytes += entry.nbytes
                    entry.version += 1
                    break
            pending.result()  # let a load in flight finish first, then write into its result
        self._evict()

    def _mark_written(self, entry: _Entry, in_cell: tuple[slice, ...]) -> None:
        """Record written elements; once all are written the stored chunk is never needed."""
        assert entry.written is not None
        region = entry.written[in_cell]
        entry.unwritten -= region.size - int(np.count_nonzero(region))
        region[...] = True
        if entry.unwritten == 0:
            entry.written = None
            self._replace_data(entry, entry.data)

    def _new_entry(self, unit: Index, covered: bool) -> _Entry:
        """A chunk about to be written without reading it: fill value plus a written-mask."""
        written = None if covered else np.zeros(self.read_chunk_shape, dtype=bool)
        entry = _Entry(self._fill_chunk, 0, written=written, unwritten=math.prod(self.read_chunk_shape))
        self._cache[unit] = entry
        self._replace_data(entry, self.read_chunk.fill_array())
        return entry

    def _clear_overhang(self, unit: Index, data: np.ndarray) -> None:
        """Elements of an edge chunk outside the array hold the fill value."""
        fill = self._fill_chunk.reshape(-1)[0]
        for d, (u, c, s) in enumerate(zip(unit, self.read_chunk_shape, self.shape, strict=True)):
            inside = s - u * c
            if inside < c:
                data[(slice(None),) * d + (slice(max(inside, 0), None),)] = fill

    def _replace_data(self, entry: _Entry, data: np.ndarray) -> None:
        """Give an entry new data (a private copy, or the merged chunk) and recount its cost."""
        entry.data = data
        entry.flushing = False
        nbytes = data.nbytes + (0 if entry.written is None else entry.written.nbytes)
        self._total_bytes += nbytes - entry.nbytes
        if entry.dirty:
            self._dirty_bytes += nbytes - entry.nbytes
        entry.nbytes = nbytes

    # -- write-back --------------------------------------------------------------------------

    @property
    def dirty_bytes(self) -> int:
        return self._dirty_bytes

    def flush(self) -> None:
        """Write every dirty chunk to the store. On failure the data stays dirty for a retry."""
        with self._flush_lock:
            with self._lock:
                groups: defaultdict[Index, list[Index]] = defaultdict(list)
                for unit, entry in self._cache.items():
                    if entry.dirty:
                        groups[self._location(unit)[0]].append(unit)
            jobs = {chunk: self._writers.submit(self._flush_chunk, chunk, units)
                    for chunk, units in groups.items()}
            failure: Exception | None = None
            for chunk, job in jobs.items():
                try:
                    job.result()
                except (OSError, ChunkError) as e:
                    log.error("write-back of %r failed: %s", self.chunk_key(chunk), e)
                    failure = failure or e
            if failure is None:
                try:
                    self.store.sync_directories(self.chunk_key(chunk) for chunk in jobs)
                except OSError as e:
                    failure = e
            if failure is not None:
                raise failure
        self._evict()

    def _flush_chunk(self, chunk: Index, units: list[Index]) -> None:
        with self._write_slots:
            self._write_back(chunk, units)

    def _write_back(self, chunk: Index, units: list[Index]) -> None:
        for unit in units:
            if self._cache[unit].written is not None:
                self._wait(unit, {})  # merge with what is stored before encoding
        with self._lock:
            snapshot = {unit: self._cache[unit] for unit in units}
            versions = {unit: entry.version for unit, entry in snapshot.items()}
            arrays = {unit: entry.data for unit, entry in snapshot.items()}
            for entry in snapshot.values():
                entry.flushing = True
        key = self.chunk_key(chunk)
        if self.sharding is None:
            self._store_chunk(key, arrays[chunk])
        else:
            self._store_shard(chunk, key, arrays)
        with self._lock:
            for unit, entry in snapshot.items():
                if entry.data is arrays[unit]:
                    entry.flushing = False
                if entry.version == versions[unit]:  # else written meanwhile: still dirty
                    self._dirty_bytes -= entry.nbytes
                entry.saved_version = versions[unit]

    def _store_chunk(self, key: str, data: np.ndarray) -> None:
        if is_fill(data, self.metadata.fill_value):
            self.store.delete(key)
            self.stats.chunks_deleted += 1
        else:
            self.store.put(key, self.pipeline.encode(data), sync_directory=False)
            self.stats.chunks_written += 1

    def _store_shard(self, chunk: Index, key: str, arrays: dict[Index, np.ndarray]) -> None:
        sharding = self.sharding
        assert sharding is not None
        # A shard whose every inner chunk is new need not be read first.
        whole = len(arrays) == math.prod(sharding.chunks_per_shard)
        encoded = {} if whole else self._stored_inner_chunks(key)
        shard_origin = tuple(c * p for c, p in zip(chunk, sharding.chunks_per_shard, strict=True))
        for unit, data in arrays.items():
            inner = tuple(u - o for u, o in zip(unit, shard_origin, strict=True))
            new = sharding.encode_inner(data)
            if new is None:
                encoded.pop(inner, None)
            else:
                encoded[inner] = new
        with self._lock:
            self._rewrites_running += 1
            self._rewrite_generation += 1
        try:
            if encoded:
                shard = sharding.assemble(encoded)
                self.store.put(key, shard, sync_directory=False)
                span = sharding.index_span(len(shard))
                index: ShardIndex | None = sharding.decode_index(shard[span.offset : span.end], len(shard))
                self.stats.chunks_written += 1
            else:
                self.store.delete(key)
                index = None
                self.stats.chunks_deleted += 1
            self._remember_index(chunk, index)
        except BaseException:
            with self._lock:
                self._index_bytes -= _index_cost(self._indexes.pop(chunk, None))
            raise
        finally:
            with self._lock:
                self._rewrites_running -= 1
                self._rewrite_generation += 1

    def _stored_inner_chunks(self, key: str) -> dict[Index, BytesLike]:
        """The encoded bytes of every inner chunk a stored shard holds."""
        sharding = self.sharding
        assert sharding is not None
        shard = self.store.get(key)
        if shard is None:
            return {}
        try:
            if len(shard) < sharding.index_nbytes:
                raise CodecError("shard is shorter than its index")
            span = sharding.index_span(len(shard))
            index = sharding.decode_index(shard[span.offset : span.end], len(shard))
        except CodecError as e:
            raise ChunkError(key, str(e)) from None
        view = memoryview(shard)
        found: dict[Index, BytesLike] = {}
        for inner in sharding.inner_positions():
            where = index.span(inner)
            if where is not None:
                found[inner] = view[where.offset : where.end]
        return found

    # -- cache bookkeeping -------------------------------------------------------------------

    @property
    def cached_bytes(self) -> int:
        return self._total_bytes

    def _evict(self) -> None:
        """Drop least recently used clean chunks until the cache fits its limit."""
        with self._lock:
            if self._total_bytes <= self.cache_bytes:
                return
            for unit in list(self._cache):
                entry = self._cache[unit]
                if entry.dirty or entry.flushing:
                    continue
                del self._cache[unit]
                self._total_bytes -= entry.nbytes
                if self._total_bytes <= self.cache_bytes:
                    return

    # -- information -------------------------------------------------------------------------

    def stored_chunk_count(self) -> int:
        """How many chunk (or shard) objects the store holds."""
        encoding = self.metadata.chunk_key_encoding
        return sum(1 for key in self.store.list() if encoding.parse(key, len(self.shape)) is not None)


def _index_cost(index: ShardIndex | None) -> int:
    return 64 + (0 if index is None else index.entries.nbytes)


def _partial_read_sharding(pipeline: Pipeline) -> ShardingCodec | None:
    """The sharding codec when its inner chunks can be read one by one."""
    codec = pipeline.array_to_bytes
    if isinstance(codec, ShardingCodec) and not pipeline.array_codecs and not pipeline.bytes_codecs:
        return codec
    return None

