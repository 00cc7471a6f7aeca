"""Read and write regions of an array over its chunk grid.

The unit of caching is the *read chunk*: the chunk itself, or the inner chunk when the
array's codec is `sharding_indexed`, so a read fetches only the shard index (cached) and the
inner chunks it touches. The unit of storing is the *write chunk* (the chunk or shard).

`ZarrArray` is a facade over objects with one owner each: its `Geometry` (swapped whole on a
resize), its part of the mount's cache (`ArrayCache`: the lock, the entries, the dirty
bytes), the `ChunkSource` (deduplicated loads over plain or sharded chunk I/O), the
`WriteBack` (early stores, write slots, flushes), the `Rechecker` (what was seen of the
store), `Streams` and the `Resizer`.

The array never reads or writes its metadata document: it is constructed from an
`ArrayDescription`, and a resize asks its `metadata_writer` to store the new shape. Opening
and creating arrays in a store is zarrfs.array_metadata's.

Concurrency: every method is thread-safe. Writes go into cached chunks; a partial write to a
chunk that is not cached does not read it: the chunk records which elements were written and
is merged with the stored one only when it is read or written back.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from ..codecs import BytesLike, ChunkSpec
from ..codecs.stored_form import StoredForm, stored_form
from ..errors import ReadOnlyError
from ..formats.description import ArrayDescription
from ..grid import Box, Index
from ..store import Store
from . import stored
from .cache import DEFAULT_CACHE_BYTES, ArrayCache, CacheEntry, ChunkCache, Fetched, by_piece
from .geometry import Geometry
from .read_chunks import ReadChunks
from .reads import ChunkSource, Stream, Streams
from .recheck import Changes, Rechecker
from .shared import Shared
from .stored import PlainChunkIO, ShardedChunkIO, Stats, StoredChunk, StoredRows, in_rows, rows_directory
from .writes import Early, MetadataWriter, Resizer, WriteBack

# Rechecks started beside an open's other waits (`start_recheck`), of every array.
_RECHECKS = ThreadPoolExecutor(16, thread_name_prefix="recheck")


class ZarrArray:
    """The array layer's one face to the views, the tree and the CLI (the module's docstring).
    Its methods are many because its users are: each is a line or two handing a request to the
    part that owns it, and a split along its users (readers, writers, streams) would give each
    of them the same parts to share again, so it stays one facade."""

    def __init__(
        self,
        store: Store,
        description: ArrayDescription,
        raw_metadata: bytes = b"",
        *,
        cache_bytes: int | None = None,
        threads: int | None = None,
        shared: Shared | None = None,
        metadata_writer: MetadataWriter | None = None,
    ) -> None:
        """`raw_metadata`: the stored metadata document (b"" when not read yet).
        `metadata_writer` stores the metadata document with a new shape on a resize; without
        one the array cannot be resized (zarrfs.array_metadata opens arrays with theirs)."""
        self._owns_shared = shared is None
        self.shared = shared or Shared(DEFAULT_CACHE_BYTES if cache_bytes is None else cache_bytes, threads)
        self.owner = self.shared.register(self)
        self.store = store
        self.data_type = description.data_type
        read = ReadChunks.of(description)
        self.pipeline, self.sharding, self.read_chunk_shape = read.pipeline, read.sharding, read.shape
        self.read_chunk = ChunkSpec(self.read_chunk_shape, description.data_type, description.fill_value)
        read_grid = read.grid
        self.regular_read_chunks = read_grid is None  # (every read chunk is read_chunk_shape)
        self._geometry = Geometry(description, raw_metadata, self.read_chunk_shape, read_grid)
        self.stats = Stats()
        self.array_cache = ArrayCache(self.shared.cache, self.owner, self.read_chunk)
        self.io = self._chunk_io(store, description)
        self.rechecker = Rechecker(self.array_cache, self.io, store, self.geometry, self.shared.counters)
        self.source = ChunkSource(self.array_cache, self.io, store, self.geometry, self.rechecker.seen,
                                  self.shared.loaders, self.shared.counters,
                                  fill_missing=self.shared.fill_missing_reads)
        self.writeback = WriteBack(self.source, self.rechecker, self.shared, self.geometry)
        self.streams = Streams(self.source, self.shared)
        self.resizer = Resizer(self.array_cache, self.writeback, store, self.geometry, self._take, self.write,
                               metadata_writer, self.io.forget_stored)

    def _chunk_io(self, store: Store, description: ArrayDescription) -> PlainChunkIO:
        """How the array's chunks move between the store and memory: whole, through their
        shards, or on a rectilinear grid."""
        shared, keep_fill = self.shared, self.shared.store_fill_chunks
        if description.rectilinear is not None:
            return stored.rectilinear_io(store, self.pipeline, lambda: self.metadata, self.sharding,
                                         self.stats, shared.counters,
                                         (shared.cache, self.owner, shared.loaders), keep_fill=keep_fill)
        if self.sharding is None:
            return PlainChunkIO(store, self.pipeline, description.fill_value, self.stats, shared.counters,
                                keep_fill=keep_fill)
        return ShardedChunkIO(store, self.pipeline, self.sharding, shared.cache, self.owner, self.stats,
                              shared.counters, shared.loaders, keep_fill=keep_fill)

    def close(self) -> None:
        self.array_cache.drop_all()
        self.shared.unregister(self.owner)
        if self._owns_shared:
            self.shared.close()

    # -- geometry: one value, swapped whole ------------------------------------------------------

    def geometry(self) -> Geometry:
        """The array's geometry now (take it once per operation)."""
        return self._geometry

    def _take(self, geometry: Geometry) -> None:
        self._geometry = geometry

    @property
    def metadata(self) -> ArrayDescription:
        return self._geometry.description

    @metadata.setter
    def metadata(self, description: ArrayDescription) -> None:
        """A new description of the same grid (its attributes changed)."""
        self._geometry = self._geometry.described(description, self._geometry.raw_metadata)

    @property
    def raw_metadata(self) -> bytes:
        return self._geometry.raw_metadata

    @raw_metadata.setter
    def raw_metadata(self, raw: bytes) -> None:
        self._geometry = self._geometry.described(self._geometry.description, raw)

    @property
    def shape(self) -> Index:
        return self._geometry.shape

    @property
    def chunk_shape(self) -> Index:
        return self._geometry.chunk_shape

    @property
    def grid_shape(self) -> Index:
        return self._geometry.grid_shape

    @property
    def extended_shape(self) -> Index:
        """The shape of the whole chunk grid, edge chunks included."""
        return self._geometry.description.covered()

    @property
    def read_only(self) -> bool:
        return self.store.read_only

    def chunk_key(self, chunk: Sequence[int]) -> str:
        return self._geometry.chunk_key(chunk)

    # -- what tests and commands look at -------------------------------------------------------

    @property
    def cache(self) -> ChunkCache:
        """The mount's cache (every array's)."""
        return self.shared.cache

    @property
    def early(self) -> Early:
        return self.writeback.early

    @property
    def fill_chunk(self) -> np.ndarray:
        return self.array_cache.fill_chunk

    @property
    def dirty_bytes(self) -> int:
        return self.array_cache.dirty_bytes

    @property
    def fetches_remotely(self) -> bool:
        """Whether a read of stored bytes waits on a network round trip."""
        return self.store.capabilities.round_trips

    @property
    def changes(self) -> tuple[int, int, int]:
        """A value that changes whenever the elements or the stored objects may have (a read
        finding another writer's version of an object included)."""
        return self.array_cache.mutations, self.stats.stores, self.rechecker.seen.found

    def stored_chunk_count(self) -> int:
        """How many chunk (or shard) objects the store holds."""
        geometry = self._geometry
        encoding = geometry.description.chunk_key_encoding
        return sum(1 for key in self.store.list() if encoding.parse(key, len(geometry.shape)) is not None)

    # -- reading -------------------------------------------------------------------------------

    def read(self, box: Box) -> np.ndarray:
        """The elements of `box` (array coordinates, edge chunks' overhang allowed); a
        read-only view into the cache when the box lies in one chunk."""
        return self.source.read_boxes([box])[0]

    def read_boxes(self, boxes: Sequence[Box]) -> list[np.ndarray]:
        """The elements of each box, all taken from one version of every chunk they touch."""
        return self.source.read_boxes(boxes)

    def read_unit(self, unit: Index) -> np.ndarray:
        """A read chunk's elements, whole, for a reader that takes them all at once: cached,
        or decoded and not kept (ChunkSource.read_unit)."""
        return self.source.read_unit(unit)

    def cached(self, boxes: Sequence[Box]) -> bool:
        """Whether the cache holds every read chunk the boxes touch whole."""
        units = [cell for box in boxes for cell in self._geometry.cells_touched(box)]
        return not self.array_cache.missing(units)

    def prefetch(self, box: Box) -> None:
        """Start loading the chunks of `box` in the background."""
        self.source.start(self._geometry.cells_touched(box))

    def stream(self, box: Box, dtype: np.dtype[Any] | None = None) -> Stream | None:
        """Start filling a buffer with `box` (zarrfs.array.reads.streaming), its elements as `dtype`
        (the storage type in any byte order; None: as stored); None: no room for it."""
        dtype = self.data_type.storage if dtype is None else dtype
        return self.streams.start(self._geometry, box, self.read_chunk.nbytes, dtype)

    @property
    def slab_bytes(self) -> int:
        """What the buffers `stream` fills may hold at once, all readers together (the
        cache's share for them)."""
        return self.array_cache.mount.reserve_limit

    # -- encoded chunks, for readers that decode them (the TIFF view) --------------------------

    @property
    def stored_form(self) -> StoredForm | None:
        """What a read chunk's stored bytes are, when a reader can take them as they are (not
        located in the shards of a rectilinear grid: each has an index of its own shape)."""
        if not self.metadata.is_regular:
            return None
        return stored_form(self.sharding.inner if self.sharding else self.pipeline)

    def locate_stored(self, units: Sequence[Index], *, by_rows: bool = False) -> dict[Index, StoredChunk]:
        """Where the encoded bytes of the read chunks `units` lie now (ChunkSource.locate_stored)."""
        return self.source.locate_stored(units, by_rows=by_rows)

    def stored_sizes(self, units: Sequence[Index], *, by_rows: bool = False) -> dict[Index, int]:
        """The stored size of each of the read chunks `units` that is stored (an inner chunk's
        in its shard), found as `locate_stored` finds them: nothing is read but shard indexes."""
        wanted = set(units)
        located = self.locate_stored(units, by_rows=by_rows)
        return {unit: where.nbytes for unit, where in located.items() if unit in wanted}

    def stored_rows(self) -> StoredRows | None:
        """The rows of the grid of stored objects holding one (`stored_rows`: one listing),
        None when their keys have no row directories (every row is then asked about)."""
        return stored.stored_rows(self.store, self._geometry.chunk_key, len(self.shape))

    def stored_sizes_numbered(self, numbers: np.ndarray, rows: StoredRows | None = None) -> dict[int, int]:
        """`stored_sizes` of read chunks by their number in C order (of a regular grid of read
        chunks), looked up by their rows where their keys have row directories (a scan or a
        listing of each: a span of hundreds of chunks is a few requests, not a stat each);
        with `rows` (`stored_rows`), those in other rows are not stored, unasked."""
        grid = tuple(-(-n // c) for n, c in zip(self.shape, self.read_chunk_shape, strict=True))
        numbers = np.asarray(numbers, dtype=np.int64)
        if rows is not None and len(grid) > 1:
            per = self.sharding.chunks_per_shard[0] if self.sharding else 1
            numbers = numbers[in_rows(numbers // math.prod(grid[1:]) // per, rows)]
        units = [tuple(u) for u in np.stack(np.unravel_index(numbers, grid), axis=-1).tolist()]
        by_rows = rows is not None or rows_directory(self._geometry.chunk_key, len(grid)) is not None
        found = self.stored_sizes(units, by_rows=by_rows)
        return {int(np.ravel_multi_index(unit, grid)): size for unit, size in found.items()}

    def read_stored_unit(self, unit: Index) -> BytesLike | None:
        """A read chunk's encoded bytes as stored now (ChunkSource.read_stored_unit)."""
        return self.source.read_stored_unit(unit)

    def read_stored(self, where: StoredChunk) -> BytesLike:
        """A read chunk's encoded bytes as located (ChunkSource.read_stored)."""
        return self.source.read_stored(where)

    def read_chunk_now(self, unit: Index, into: memoryview) -> int | None:
        """A read chunk's stored bytes into `into` if that waits for nothing (ChunkSource.read_chunk_now)."""
        return self.source.read_chunk_now(unit, into)

    def encoded_fill(self) -> BytesLike:
        """A read chunk of fill values, encoded."""
        return (self.sharding.inner if self.sharding else self.pipeline).encode(self.array_cache.fill_chunk)

    def fetch(self, units: Sequence[Index]) -> Iterator[Fetched]:
        """Read chunks of one stored object as stored now (ChunkSource.fetch)."""
        return self.source.fetch(units)

    def wait(self, unit: Index, futures: dict[Index, Future[CacheEntry]] | None = None) -> CacheEntry:
        """The complete cached entry of a read chunk, loading it as needed (ChunkSource.wait)."""
        return self.source.wait(unit, futures or {})

    # -- writing -------------------------------------------------------------------------------

    def write(self, box: Box, values: np.ndarray) -> None:
        """Set the elements of `box` (values in the storage dtype, shaped like the box)."""
        if self.read_only:
            raise ReadOnlyError("the array is read-only")
        self.writeback.make_room()
        geometry = self._geometry
        pieces = list(geometry.cells_of(box))
        parts, whole = by_piece(values, pieces), list[Index]()
        while pieces:
            applied = self.array_cache.write(geometry, pieces, parts)
            whole += applied.whole
            pieces, parts = pieces[applied.pieces:], parts[applied.pieces:]
            if applied.pending is not None:
                applied.pending.result()  # let the load finish first, then write into its result
        self.array_cache.mount.evict()
        if whole:
            self.writeback.store_early(whole)

    def flush(self) -> None:
        """Write every dirty chunk to the store. On failure the data stays dirty for a retry."""
        self.writeback.flush()

    # -- others' changes, and shape ------------------------------------------------------------

    def recheck(self, chunks: Iterable[Index] | None = None) -> Changes:
        """What other writers changed (zarrfs.array.recheck); stale cached chunks are dropped."""
        return self.rechecker.recheck(chunks)

    def start_recheck(self, chunks: Iterable[Index] | None = None) -> Future[Changes]:
        """`recheck` on a thread of its own: an open of a remote array asks about its chunks
        beside its metadata, a round trip sooner."""
        return _RECHECKS.submit(self.rechecker.recheck, chunks)

    def adopt_shape(self, shape: tuple[int, ...], raw_metadata: bytes) -> None:
        """Another writer resized the array: take its shape (nothing stored changes)."""
        self.resizer.adopt(shape, raw_metadata)

    def resize(self, shape: tuple[int, ...]) -> None:
        """Give the array a new shape (zarrfs.array.writes.resize); ResizeError when it cannot."""
        self.resizer.resize(shape)
