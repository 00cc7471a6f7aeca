"""An array's one source of read chunks, over plain or sharded chunk I/O
(zarrfs.array.stored.chunk_io): loaded into the cache on the mount's loader threads,
deduplicated (two readers of one chunk wait on one decode), or lent to a stream as they are
cached, decoded or stored (`for_stream`). Where each is decoded is zarrfs.array.reads.policy's
to say; this module only does it.

A load talks to the cache three times, always calling it, never called back: `start_loads`
(which loads begin here), `fetch_begins` (what the cache held), `install` (which ends the
load). Chunks as stored, for readers that decode them themselves (the TIFF and HDF5 views)
and for a stream's decoding processes, come from here too, their stored objects seen as a
load's are (close-to-open)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future
from typing import Any

import numpy as np

from ...codecs import BytesLike, CodecError, sent
from ...codecs.stored_form import stored_elements
from ...errors import ChunkError
from ...grid import Box, Index, Piece
from ...store import Store
from ..cache import ArrayCache, CacheEntry, Counters, Fetched
from ..decoding import MISSING, READ, REFERRED, ChunkFiles, FilesRead, ShardPart, states_of
from ..geometry import Geometry
from ..recheck import Seen
from ..stored import Encoded, PlainChunkIO, ShardedChunkIO, StoredChunk

log = logging.getLogger(__name__)


class ChunkSource:
    def __init__(self, array_cache: ArrayCache, io: PlainChunkIO, store: Store,
                 geometry: Callable[[], Geometry], seen: Seen, loaders: Executor, counters: Counters, *,
                 fill_missing: bool = True) -> None:
        """`fill_missing`: a chunk that is not stored reads as the fill value (False: a read
        of it fails, as TensorStore's fill_missing_data_reads=false)."""
        self.fill_missing = fill_missing
        self.array_cache = array_cache
        self.io = io
        self.store = store
        self.geometry = geometry  # the array's geometry now
        self.seen = seen
        self.loaders = loaders
        self.counters = counters
        self.sharded = isinstance(io, ShardedChunkIO)

    def read_boxes(self, boxes: Sequence[Box]) -> list[np.ndarray]:
        """The elements of each box, all taken from one version of every chunk they touch:
        a reply made of several boxes never mixes two versions of a chunk."""
        geometry = self.geometry()
        pieces = [list(geometry.cells_of(box)) for box in boxes]
        lent = self._written_only(pieces)
        touched = dict.fromkeys(piece.cell for found in pieces for piece in found)
        units = [unit for unit in touched if unit not in lent]
        futures = self.start(units, one_here=True)
        self.counters.add(cache_hits=len(lent) + len(units) - len(futures), cache_misses=len(futures))
        lent.update((unit, self.lend(unit, futures)) for unit in units)
        return [self._assemble(box, found, lent) for box, found in zip(boxes, pieces, strict=True)]

    def read_unit(self, unit: Index) -> np.ndarray:
        """A read chunk's elements, whole (an edge chunk's overhang the fill value), for a
        reader taking all of it in one request (a tile of data.tif): as cached, with this
        mount's writes; else decoded in this thread and kept nowhere. The reply holds it until
        it is sent, then its memory goes to the next chunk (installed in the cache, every
        chunk was fresh pages and an entry: a cold tile of 512 KiB took 20-25% longer)."""
        cached, partly_written = self.array_cache.lend_cached([unit])
        if cached:
            self.counters.add(cache_hits=1)
            return cached[0][1]
        self.counters.add(cache_misses=1)
        if partly_written:  # (merged with the stored chunk in the cache, as any read of it is)
            return self.lend(unit, self.start([unit], one_here=True))
        (fetched,) = self.fetch([unit])
        return self.array_cache.fill_chunk if fetched.data is None else fetched.data

    def _written_only(self, pieces: list[list[Piece]]) -> dict[Index, np.ndarray]:
        """The chunks partly written by this mount of which the read wants only written
        elements: lent as they are, with no load of the stored chunk."""
        if not self.array_cache.dirty_bytes:
            return {}  # (no unsaved writes: nothing partly written)
        wanted: dict[Index, list[tuple[slice, ...]]] = {}
        for found in pieces:
            for piece in found:
                wanted.setdefault(piece.cell, []).append(piece.in_cell)
        return self.array_cache.lend_written(wanted)

    def _assemble(self, box: Box, pieces: list[Piece], lent: dict[Index, np.ndarray]) -> np.ndarray:
        if len(pieces) == 1:
            # The trailing Ellipsis keeps a rank-0 result an array, not a scalar.
            selection: tuple[Any, ...] = (*pieces[0].in_cell, Ellipsis)
            view: np.ndarray = lent[pieces[0].cell][selection]
            view.flags.writeable = False  # a view of the cache: writes must go through write()
            return view
        out = np.empty(box.shape, dtype=self.array_cache.fill_chunk.dtype)
        for piece in pieces:
            out[piece.in_box] = lent[piece.cell][piece.in_cell]
        return out

    def lend(self, unit: Index, futures: dict[Index, Future[CacheEntry]]) -> np.ndarray:
        """A read chunk's data for a reader to use outside the lock: writers leave it as it is
        (they copy first), so a reader never sees half of a write."""
        entry = self.wait(unit, futures)
        while (data := self.array_cache.lend(entry)) is None:
            entry = self.wait(unit, {})  # its buffer went to a new chunk: look again
        return data

    def start(self, units: Iterable[Index], *, one_here: bool = False) -> dict[Index, Future[CacheEntry]]:
        """Start loading those of `units` not cached (or join their loads in flight).
        `one_here`: the caller waits for them all, so the last load begun is done in its
        thread once the others are handed to the loaders (a read of one chunk not cached
        waits on no other thread: a hop there and back cost a tile of data.tif as much as a
        third of its decode)."""
        futures, begun = self.array_cache.start_loads(units)
        here = begun.pop() if one_here and begun else None
        for unit in begun:
            try:
                self.loaders.submit(self._load, unit, futures[unit])
            except BaseException as e:  # (the loaders were shut down: the mount is stopping)
                self._failed(unit, futures[unit], e)
        if here is not None:
            self._load(here, futures[here])
        return futures

    def wait(self, unit: Index, futures: dict[Index, Future[CacheEntry]]) -> CacheEntry:
        """The complete cached entry of a read chunk, loading or merging it as needed."""
        future = futures.get(unit)
        if future is not None:
            return future.result()
        while True:
            entry = self.array_cache.complete(unit)
            if entry is not None:
                return entry
            # Another thread may finish the load in between: then nothing is started.
            started = self.start([unit])
            if unit in started:
                return started[unit].result()

    def _load(self, unit: Index, done: Future[CacheEntry]) -> None:
        """Decode a read chunk from the store into the cache (worker thread); fetched again
        when the store changed meanwhile (ArrayCache.install)."""
        try:
            entry = None
            while entry is None:
                start = self.array_cache.fetch_begins(unit)
                (fetched,) = self.fetch([unit], merging=start.merging)
                entry = self.array_cache.install(unit, fetched, start)
        except BaseException as e:  # (the load's error is its waiters')
            self._failed(unit, done, e)
        else:
            done.set_result(entry)

    def _failed(self, unit: Index, done: Future[CacheEntry], error: BaseException) -> None:
        self.array_cache.load_failed(unit)
        done.set_exception(error)

    def as_read(self, unit: Index, fetched: Fetched, geometry: Geometry | None = None) -> Fetched:
        """A chunk as stored, as a read gives it: outside the array the fill value, whatever
        a writer left there (v1, v2: undefined)."""
        geometry = geometry or self.geometry()
        if fetched.data is not None and geometry.is_edge(unit):
            fetched.data = np.array(fetched.data, order="C")
            geometry.clear_overhang(unit, fetched.data, self.array_cache.fill_element)
        return fetched

    def fetch(self, units: Sequence[Index], *, merging: bool = False) -> Iterator[Fetched]:
        """Read chunks of one stored object (a chunk, or inner chunks of one shard, read
        together) as stored now: decoded (None: not stored, all fill), and the generation.
        `merging`: for a write-back to merge with, where a missing chunk is the fill value
        whatever `fill_missing` says (ChunkError otherwise, when it says no)."""
        geometry = self.geometry()
        for unit, fetched in self._checked(geometry, units, self.io.fetch_run, merging):
            yield self.as_read(unit, fetched, geometry)

    def fetch_encoded(self, units: Sequence[Index], *, open_files: bool = False) -> Iterator[Encoded]:
        """As `fetch`, the chunks as stored (for a decoder elsewhere: `io.decoder`; local files
        opened, `open_files`); outside the array, what a writer left there (whoever decodes
        them copies only what is inside)."""
        run = functools.partial(self.io.fetch_encoded_run, open_files=open_files)
        return (found for _, found in self._checked(self.geometry(), units, run, False))

    def _checked(self, geometry: Geometry, units: Sequence[Index], run_of: Callable[..., Iterator[Any]],
                 merging: bool) -> Iterator[tuple[Index, Any]]:
        """What `run_of` (a chunk I/O's fetch_run or fetch_encoded_run) gives of `units`, each
        noted as seen (close-to-open), a chunk not stored refused if reads of them fail."""
        chunk = self.io.location(units[0])[0]
        key = geometry.chunk_key(chunk)
        since = self.seen.clock()
        try:
            run = run_of(key, chunk, [self.io.location(unit)[1] for unit in units])
            for unit, fetched in zip(units, run, strict=True):
                if not fetched.stored and not (self.fill_missing or merging):
                    log.error("chunk %r is not stored (fill_missing_data_reads=false)", self.store.path(key))
                    raise ChunkError(key, "not stored, and fill_missing_data_reads is false")
                self.seen.note(chunk, fetched.generation, read_since=since)
                yield unit, fetched
        except CodecError as e:
            log.error("corrupt chunk %r: %s", self.store.path(key), e)
            raise ChunkError(key, str(e)) from None

    # -- chunks as stored, for readers that decode them -----------------------------------------

    def locate_stored(self, units: Sequence[Index], *, by_rows: bool = False) -> dict[Index, StoredChunk]:
        """Where the encoded bytes of the read chunks `units` lie now, and of the others in
        the shards that hold them (those not stored are left out): one look at the stored
        objects (`Store.stats`) and at the index of each shard among them."""
        geometry = self.geometry()
        objects = {self.io.location(unit)[0] for unit in units}
        keys = {chunk: geometry.chunk_key(chunk) for chunk in sorted(objects)}
        return self.io.locate(keys, by_rows=by_rows)

    def read_stored_unit(self, unit: Index) -> BytesLike | None:
        """A read chunk's encoded bytes as stored now (None: not stored): a chunk's object in
        one GET; an inner chunk of a shard from the shard, where its index says. Its stored
        object's generation is noted, as a load's is (close-to-open: `recheck`)."""
        seen, since = self.seen, self.seen.clock()
        if not self.sharded:
            found = self.io.read_object(self.geometry().chunk_key(unit))
            seen.note(unit, None if found is None else found.generation, read_since=since)
            return None if found is None else found.data
        shard = self.io.location(unit)[0]
        located = self.locate_stored([unit])
        seen.note(shard, next((where.generation for where in located.values()), None), read_since=since)
        where = located.get(unit)
        return None if where is None else self.read_stored(where)

    def read_stored(self, where: StoredChunk) -> BytesLike:
        """A read chunk's encoded bytes as located (ChunkError when they changed since)."""
        return self.io.read_located(where)

    def read_chunk_now(self, unit: Index, into: memoryview) -> int | None:
        """Fill the start of `into` with a read chunk's stored bytes (its object, or an inner
        chunk of a shard) if that waits for nothing and they fit: their size (-1: not stored);
        None when it would wait or they do not fit (part of `into` may have been written).
        The stored object's generation is noted, as `read_stored_unit` notes it."""
        where = self.io.location(unit)
        since = self.seen.clock()
        found = self.io.read_unit_now(self.geometry().chunk_key(where[0]), where, into)
        if found is None:
            return None
        self.seen.note(where[0], found[1], read_since=since)
        return found[0]

    # -- chunks for a stream, not cached -------------------------------------------------------

    def chunk_files(self) -> ChunkFiles | None:
        """How a decoding process reads this array's chunks (or inner chunks of its shards)
        from their files itself, where it may: an array of a regular grid in a store of local
        files (whose directory it lends, `LocalFiles.lend_directory`, where the kernel keeps its
        rules); else None."""
        geometry = self.geometry()
        if (geometry.read_grid is not None or not geometry.description.is_regular or self.io.decoder is None
                or not self.store.capabilities.local_files):
            return None
        inner = self.io.sharding.inner if isinstance(self.io, ShardedChunkIO) else self.io.pipeline
        elements = stored_elements(inner)
        return ChunkFiles(geometry.description.chunk_key_encoding, geometry.read_chunk_shape, self.io.decoder,
                          None if elements is None else sent(elements))

    def shard_part(self, geometry: Geometry, cells: Sequence[Index]) -> ShardPart | None:
        """Where a stream job's inner chunks (all of one shard) lie, as its index says now,
        for a decoding process to read them; None where the store reports no generations."""
        shard = self.io.location(cells[0])[0]
        key = geometry.chunk_key(shard)
        assert isinstance(self.io, ShardedChunkIO)
        found = self.io.inner_spans(key, shard, [self.io.location(cell)[1] or () for cell in cells])
        return None if found is None else ShardPart(key, *found)

    def files_read(self, geometry: Geometry, cells: Sequence[Index], found: FilesRead, since: int) -> None:
        """What a decoding process read of a stream's chunks from their files (those it left
        to the daemon aside), noted and counted as `fetch` notes and counts what it reads; a
        chunk not stored is refused if reads of them fail."""
        missing = states_of(found, cells, MISSING)
        if missing and not self.fill_missing:
            key = geometry.chunk_key(missing[0])
            log.error("chunk %r is not stored (fill_missing_data_reads=false)", self.store.path(key))
            raise ChunkError(key, "not stored, and fill_missing_data_reads is false")
        noted = {self.io.location(cell)[0]: generation for cell, generation, state in zip(
            cells, found.generations, found.states, strict=True) if state != REFERRED}
        self.seen.note_read(noted.items(), since)  # (of the stored objects: an inner chunk's shard)
        read = found.states.count(READ)
        self.io.count_fetches(read, found.nbytes)
        self.counters.add(cache_misses=len(cells) - found.states.count(REFERRED), chunks_decoded=read,
                          decode_seconds=found.cpu)

    def fetched_together(self, geometry: Geometry, units: Sequence[Index]) -> list[str]:
        """The keys of a stream job's plain chunks the cache does not hold, which a store that
        batches GETs fetches all at once (see jobs.S3_JOB_BYTES)."""
        if self.sharded or not self.store.capabilities.batched_gets or len(units) <= 1:
            return []
        return [geometry.chunk_key(unit) for unit in self.array_cache.missing(units)]

    def read_together(self, keys: list[str], *, early: bool) -> dict[str, str]:
        """Fetch `keys` (`fetched_together`) at once, held for `for_stream` until `let_go`
        (PlainChunkIO.read_together): those read `early`, before their rows' check answered
        (never while this mount has unsaved writes), with their generations, to `confirm`."""
        return self.io.read_together(keys, early=early and not self.array_cache.dirty_bytes)

    def let_go(self, keys: list[str]) -> None:
        """Forget what `read_together` fetched of `keys` and `for_stream` did not take."""
        self.io.let_go(keys)

    def confirm(self, unchecked: dict[str, str]) -> Future[set[str]]:
        """The keys of `unchecked` (read early by `read_together`) that were stale, once their
        checks answer."""
        cached = self.store.cached_on_disk
        if cached is not None:
            return cached.confirm(unchecked)
        answered: Future[set[str]] = Future()  # (nothing is read unchecked without a disk cache)
        answered.set_result(set())
        return answered

    def lend_directory(self) -> int | None:
        """The store's directory, lent for a decoding process to read the chunk files below it
        (`chunk_files`); the caller closes it. None where the store lends none now."""
        files = self.store.local_files
        return None if files is None else files.lend_directory()

    def for_stream(self, geometry: Geometry, units: list[Index],
                   encoded: bool = False) -> Iterator[tuple[Index, np.ndarray | Encoded]]:
        """Read chunks' elements (all of one stored object), in no particular order: cached
        (with this mount's unsaved writes), or decoded here, those the cache does not hold
        read together and decoded one at a time (so a job holds one decoded chunk, whatever
        its size); `encoded`: those not cached as stored, for a decoding process.

        A chunk the cache does not hold is not put there: a stream reads its chunks once, in
        order, and the page cache keeps what the reader got. Decoding into a buffer freed at
        once reuses the same memory chunk after chunk, where filling the cache faults in fresh
        pages for every byte streamed (a cold read 20-25% slower). A chunk partly written by
        this mount is merged into its entry, as a load does. Never waits for another job: on
        a loader thread that could be one queued behind this one."""
        array_cache, io = self.array_cache, self.io
        cached, partly_written = array_cache.lend_cached(units)
        yield from cached
        have = {unit for unit, _ in cached}
        missing = [unit for unit in units if unit not in have]
        if not missing:
            return
        self.counters.add(cache_misses=len(missing))
        self._read_ahead(geometry, io.location(missing[0])[0])
        # (a chunk partly written here is merged with what is known to be stored, never
        # with bytes read before their check answered: `read_together`)
        merged = [unit for unit in missing if unit in partly_written]
        if encoded and not merged:
            run = self.fetch_encoded(missing, open_files=True)
            for unit, found in zip(missing, run, strict=True):
                yield unit, found if found.stored else array_cache.fill_chunk
            return
        io.let_go([geometry.chunk_key(io.location(unit)[0]) for unit in merged])
        starts = {unit: array_cache.fetch_begins(unit) for unit in merged}
        for unit, fetched in zip(missing, self.fetch(missing), strict=True):
            if unit in starts:
                # (or the entry a load installed)
                data = array_cache.install_lent(unit, fetched, starts[unit])
                if data is not None:
                    yield unit, data
                    continue
                # The store changed meanwhile (written back here, or by another writer).
                (fetched,) = self.fetch([unit])
            yield unit, array_cache.fill_chunk if fetched.data is None else fetched.data

    def _read_ahead(self, geometry: Geometry, chunk: Index) -> None:
        """Remote shards are fetched whole; and a stream goes down the first axis, so the
        shard below is next."""
        self.io.read_ahead(geometry.chunk_key(chunk), chunk)
        if self.sharded and chunk and chunk[0] + 1 < geometry.grid_shape[0]:
            below = (chunk[0] + 1, *chunk[1:])
            self.io.read_early(geometry.chunk_key(below), below)
