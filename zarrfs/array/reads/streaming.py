"""Streaming a region into a caller's buffer: jobs on the mount's loader threads, each
decoding a few read chunks (inner chunks of one shard read with one request where they lie
next to each other) and copying their parts straight into the buffer. Where the mount has
decoding processes (zarrfs.array.decoding) and the buffer is in shared memory, a job reads
the chunks and hands them to a process, which decodes them into the buffer: the daemon's
interpreter lock is left to its replies and store reads.

A sequential reader would otherwise pay for assembling every reply from ~32 cached pieces
on the request path. A stream takes chunks from the cache (with this mount's unsaved writes),
and decodes the others without caching them.

A stream is a snapshot: it is `current` while the array's `mutations` count is what it was
when the stream began. Every change to an array's elements, cached or stored, bumps that count
after the change is made, so a stream that overlapped a change is never used.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import numpy as np

from ...errors import ZarrfsError
from ...grid import Box, Index, Piece
from ..decoding import DecodePool, Item, close_files
from ..geometry import Geometry
from ..shared import Shared
from ..stored import Encoded, ShardedChunkIO
from .loader import ChunkLoader

log = logging.getLogger(__name__)


JOB_BYTES = 256 << 10  # decoded bytes per job, at least one chunk
# Chunks smaller than this that decode cheaply (chunk_io.CHEAP_DECODE_SECONDS), read from a
# local store, are decoded by one thread at a time. Each costs ~30 us of Python and system
# calls, which hold the interpreter lock; two threads at it hand the lock back and forth at
# every call. Measured, cold dd of float32 arrays with one loader against two: 4 KiB zstd
# chunks 100-142 against 73-104 MB/s, with a third less CPU; 16 KiB zstd 290-408 against
# 269-328, 16 KiB blosc 254-321 against 229-292. Not when decoding is most of the work:
# 16 KiB gzip chunks (54 us to decode) 167-202 against 242-321, 64 KiB zstd 419-527 against
# 489-594. Small chunks count as cheap until measured: most codecs decode them so.
SMALL_CHUNK_BYTES = 32 << 10
SHARD_JOB_BYTES = 4 << 20  # of inner chunks of one shard (read together where they can be)
# Read chunks at least this large decode in the decoding processes (smaller ones cost more in
# messages than in decoding: they stay on the loader threads, the small ones on one lane), a
# job's worth in one message.
PROCESS_CHUNK_BYTES = 64 << 10
PROCESS_JOB_BYTES = 4 << 20
# On S3, the chunks of a job are fetched together: a GET waited for on the event loop costs
# a loader ~0.3 ms of Python besides the request (fsspec's sync, the thread hops); four at a
# time, ~0.1 ms each. Measured, 512 GETs of 512 KiB chunks from 32 threads: 0.52 s of CPU
# one at a time, 0.39 s four at a time. At most S3_JOB_CHUNKS in flight a job.
S3_JOB_BYTES = 2 << 20
S3_JOB_CHUNKS = 16


class Streams:
    """The streams of one array: what they read from (its loader, and through it its cache
    view, chunk I/O and store) and the worker failures already reported."""

    def __init__(self, loader: ChunkLoader, shared: Shared) -> None:
        self.loader = loader
        self.view = loader.view
        self.io = loader.io
        self.store = loader.store
        self.shared = shared
        self.sharded = isinstance(loader.io, ShardedChunkIO)
        self._reported: set[type[BaseException]] = set()
        self._reported_lock = threading.Lock()

    def start(self, geometry: Geometry, box: Box, read_chunk_nbytes: int,
              dtype: np.dtype[Any]) -> Stream | None:
        """A stream of `box` as elements of `dtype` (the array's, in any byte order: swapped
        as chunks are copied in), or None when readers' buffers hold their share of the cache."""
        buffer = self.view.mount.lend_slab(box.size * dtype.itemsize)
        return None if buffer is None else Stream(self, geometry, box, buffer, dtype, read_chunk_nbytes)

    def failed(self, geometry: Geometry, box: Box, error: BaseException) -> None:
        """A job failed (the reader falls back to reading through the cache, which reports
        the error itself): logged once per kind of failure, not once per chunk, so a bug
        shows as more than lost speed."""
        with self._reported_lock:
            if type(error) in self._reported:
                return
            self._reported.add(type(error))
        log.warning("a stream of %s of %r failed (reads fall back to the cache): %s: %s", box,
                    self.store.path(""), type(error).__name__, error,
                    exc_info=not isinstance(error, (OSError, ZarrfsError)))  # (a bug: its traceback)


class Stream:
    """A buffer (`out`, shaped like `box`) being filled with the array's elements of `box`.

    The buffer is lent by the cache (ChunkCache.lend_slab) from `start` until `close` (or,
    when jobs are still writing into it then, until the last of them ends). Once given back it
    may be another slab's: readers take its bytes only through `piece`, which closing ends."""

    def __init__(self, streams: Streams, geometry: Geometry, box: Box, buffer: np.ndarray,
                 dtype: np.dtype[Any], read_chunk_nbytes: int) -> None:
        self._streams = streams
        self._geometry = geometry
        self._box = box
        self._buffer: np.ndarray | None = buffer
        view = streams.view
        self.out: np.ndarray | None = buffer.view(dtype).reshape(box.shape)
        # (the shared memory its chunks are decoded into by the decoding processes, if so)
        by_processes = read_chunk_nbytes >= PROCESS_CHUNK_BYTES and streams.io.decoder is not None
        self._slab = streams.shared.shared_slab(buffer) if by_processes else None
        self.stamp = view.mutations
        self.error: BaseException | None = None
        self._closed = False
        self._finished = threading.Event()
        self._lock = threading.Lock()
        jobs = _jobs(streams, geometry, box, read_chunk_nbytes, by_processes=self._slab is not None)
        self._left = len(jobs)
        if not jobs:
            self._finished.set()
        # (Loads from a remote store wait on the network: they want every loader.)
        small = read_chunk_nbytes < SMALL_CHUNK_BYTES and streams.store.is_local
        for job in jobs:
            if small:
                streams.shared.small_chunk_lane.submit(self._fill_small, job)
            else:
                streams.shared.loaders.submit(self._fill, job)

    @property
    def done(self) -> bool:
        return self._finished.is_set()

    @property
    def current(self) -> bool:
        """Finished without error, and no element of the array changed since it began."""
        return self.done and self.error is None and self._streams.view.mutations == self.stamp

    @property
    def buffer(self) -> np.ndarray | None:
        """The slab lent to this stream (None once given back)."""
        return self._buffer

    def wait(self) -> bool:
        """Wait until finished; whether the buffer is current."""
        self._finished.wait()
        return self.current

    def piece(self, start: int, stop: int) -> memoryview | None:
        """Bytes [start, stop) of the buffer as they are, or None once closed."""
        with self._lock:
            if self.out is None or self._closed:
                return None
            return self.out.reshape(-1).view(np.uint8).data[start:stop]

    def close(self) -> None:
        """Skip the chunks not yet started and give the buffer back."""
        with self._lock:
            self._closed = True
            buffer = self._given_up() if self._finished.is_set() else None  # else the last job
        if buffer is not None:
            self._streams.view.mount.take_back_slab(buffer)

    def _given_up(self) -> np.ndarray | None:
        """The buffer, no longer this stream's (with the lock held, once closed and finished)."""
        buffer, self._buffer, self.out = self._buffer, None, None
        return buffer

    def _fill_small(self, pieces: list[Piece]) -> None:
        """On the small-chunk lane; on the loaders while the chunks decode slowly (the one
        place that decides: the cost is measured as jobs run)."""
        if self._streams.io.decodes_cheaply:
            self._fill(pieces)
        else:
            self._streams.shared.loaders.submit(self._fill, pieces)

    def _fill(self, pieces: list[Piece], early: bool = True) -> None:
        """A job: decode its chunks into the buffer. Chunks the disk cache holds are decoded
        while their rows' check is in flight (`early`: a remount's first reads need not wait
        for the listing); the job ends when the check vouches for them (`_confirmed`)."""
        out = self.out
        assert out is not None  # (given up only when every job has ended)
        streams, geometry = self._streams, self._geometry
        together = _fetched_together(streams, geometry, pieces)
        unchecked: dict[str, str] = {}
        decoding: list[tuple[Future[float], int]] = []  # (a job's decoding, its chunks)
        items: list[Item] = []
        try:
            if together:
                unchecked = streams.io.read_together(together, early=early and not streams.view.dirty_bytes)
            for run in _by_stored_object(streams, pieces):
                if self._closed or self.error is not None:
                    break
                by_unit = {piece.cell: piece for piece in run}
                by_process = self._slab is not None
                for unit, chunk in chunks_for_stream(streams, geometry, list(by_unit), by_process):
                    piece = by_unit[unit]
                    if isinstance(chunk, np.ndarray):
                        out[piece.in_box] = chunk[piece.in_cell]
                    else:
                        items.append(self._item(chunk, piece))
            if items and self.error is None:
                decoding.append((self._decoders.submit(items), len(items)))
                items = []  # (the pool's now: it closes their files)
        except BaseException as e:  # reported through `error`: the reader falls back
            self._failed(e)
        finally:
            close_files(items)
            streams.io.let_go(together)
        del out, items
        self._when_decoded(decoding, lambda: self._decoded(pieces, unchecked))

    @property
    def _decoders(self) -> DecodePool:
        found = self._streams.shared.decoders
        assert found is not None  # (a shared slab: the mount has them)
        return found

    def _item(self, chunk: Encoded, piece: Piece) -> Item:
        """A chunk for a decoding process: into the slab, where the piece goes."""
        assert self._slab is not None and self.out is not None
        return Item(self._streams.io.decoder, chunk.data or b"", self._slab, tuple(self._box.shape),
                    self.out.dtype.str, piece.in_box, piece.in_cell, chunk.opened)

    def _failed(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        self._streams.failed(self._geometry, self._box, error)

    def _when_decoded(self, decoding: list[tuple[Future[float], int]], then: Callable[[], None]) -> None:
        """`then`, once the decoding processes decoded what the job gave them (at once when
        nothing; else on the thread that hears the last answer: `then` never waits)."""
        left = [len(decoding)]
        lock = threading.Lock()

        def one_done(future: Future[float], chunks: int) -> None:
            error = future.exception()
            if error is not None:
                self._failed(error)
            else:
                self._streams.shared.counters.add(chunks_decoded=chunks, decode_seconds=future.result())
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if last:
                then()

        if not decoding:
            then()
        for future, chunks in decoding:
            future.add_done_callback(functools.partial(one_done, chunks=chunks))

    def _decoded(self, pieces: list[Piece], unchecked: dict[str, str]) -> None:
        """A job's chunks are in the buffer: it ends, once the chunks it read early are
        vouched for."""
        if unchecked and self.error is None:
            confirmed = self._streams.store.confirm(unchecked)
            confirmed.add_done_callback(lambda answer: self._confirmed(pieces, answer))
            return
        self._job_ended()

    def _confirmed(self, pieces: list[Piece], answer: Future[set[str]]) -> None:
        """The checks of the chunks a job read early answered: those that were stale are read
        again (the rest of the job, on a loader thread), or the job ends."""
        streams, geometry = self._streams, self._geometry
        try:
            stale = answer.result()
        except BaseException as e:  # (the check failed: the reader falls back, and asks again)
            self.error = e
            streams.failed(geometry, self._box, e)
            stale = set()
        again = [piece for piece in pieces if geometry.chunk_key(streams.io.location(piece.cell)[0]) in stale]
        if again and not self._closed:
            try:
                streams.shared.loaders.submit(self._fill, again, False)
                return
            except RuntimeError as e:  # (the loaders were shut down: the mount is stopping)
                self.error = e
        self._job_ended()

    def _job_ended(self) -> None:
        with self._lock:
            self._left -= 1
            if self._left:
                return
            if self._closed and self.error is None:
                self.error = CancelledStream()
            buffer = self._given_up() if self._closed else None
            if buffer is not None:
                self._streams.view.mount.take_back_slab(buffer)
            self._finished.set()


class CancelledStream(Exception):
    """The stream was cancelled before all of it was filled."""


def _jobs(streams: Streams, geometry: Geometry, box: Box, chunk_nbytes: int, *,
          by_processes: bool) -> list[list[Piece]]:
    """The pieces of `box`, a job's worth at a time: small chunks several to a job (a job
    costs more than decoding a 4 KiB chunk), more for the decoding processes (a message each);
    the inner chunks of one shard together, so that those lying next to each other are read
    with one request."""
    pieces = list(geometry.cells_of(box))
    chunk_bytes = max(1, chunk_nbytes)
    if not streams.sharded:
        per_job = max(1, (PROCESS_JOB_BYTES if by_processes else JOB_BYTES) // chunk_bytes)
        if streams.store.is_s3:
            per_job = min(S3_JOB_CHUNKS, max(1, S3_JOB_BYTES // chunk_bytes))
        return [pieces[i : i + per_job] for i in range(0, len(pieces), per_job)]
    per_job = max(1, SHARD_JOB_BYTES // chunk_bytes)
    return [run[i : i + per_job] for run in _by_stored_object(streams, pieces)
            for i in range(0, len(run), per_job)]


def _fetched_together(streams: Streams, geometry: Geometry, pieces: list[Piece]) -> list[str]:
    """The keys of a job's plain chunks the cache does not hold, which S3 fetches all at once
    (see S3_JOB_BYTES)."""
    if streams.sharded or not streams.store.is_s3 or len(pieces) <= 1:
        return []
    return [geometry.chunk_key(unit) for unit in streams.view.missing([piece.cell for piece in pieces])]


def _by_stored_object(streams: Streams, pieces: list[Piece]) -> list[list[Piece]]:
    """Pieces grouped by the chunk or shard they are stored in (in the order first met)."""
    found: dict[Index, list[Piece]] = {}
    for piece in pieces:
        found.setdefault(streams.io.location(piece.cell)[0], []).append(piece)
    return list(found.values())


def chunks_for_stream(streams: Streams, geometry: Geometry, units: list[Index],
                      encoded: bool = False) -> Iterator[tuple[Index, np.ndarray | Encoded]]:
    """Read chunks' elements (all of one stored object), in no particular order: cached (with
    this mount's unsaved writes), or decoded here, those the cache does not hold read together
    and decoded one at a time (so a job holds one decoded chunk, whatever its size).

    A chunk the cache does not hold is not put there: a stream reads its chunks once, in
    order, and the page cache keeps what the reader got. Decoding into a buffer freed at once
    reuses the same memory chunk after chunk, where filling the cache faults in fresh pages
    for every byte streamed (a cold read 20-25% slower). A chunk partly written by this mount
    is merged into its entry, as a load does. Never waits for another job: on a loader thread
    that could be one queued behind this one."""
    view, io = streams.view, streams.io
    cached, partly_written = view.lend_cached(units)
    yield from cached
    have = {unit for unit, _ in cached}
    missing = [unit for unit in units if unit not in have]
    if missing:
        streams.shared.counters.add(cache_misses=len(missing))
        chunk = io.location(missing[0])[0]
        io.read_ahead(geometry.chunk_key(chunk), chunk)  # (remote shards: fetched whole)
        if streams.sharded and chunk and chunk[0] + 1 < geometry.grid_shape[0]:
            # (a stream goes down the first axis: the shard below is next)
            below = (chunk[0] + 1, *chunk[1:])
            io.read_early(geometry.chunk_key(below), below)
        # (a chunk partly written here is merged with what is known to be stored, never
        # with bytes read before their check answered: `read_together`)
        merged = [unit for unit in missing if unit in partly_written]
        if encoded and not merged:  # (`encoded`: as stored, for a decoding process)
            run = streams.loader.fetch_encoded(missing, open_files=True)
            for unit, found in zip(missing, run, strict=True):
                yield unit, found if found.stored else view.fill_chunk
            return
        io.let_go([geometry.chunk_key(io.location(unit)[0]) for unit in merged])
        starts = {unit: view.fetch_begins(unit) for unit in merged}
        for unit, fetched in zip(missing, streams.loader.fetch(missing), strict=True):
            if unit in starts:
                data = view.install_lent(unit, fetched, starts[unit])  # (or the entry a load installed)
                view.mount.evict()
                if data is not None:
                    yield unit, data
                    continue
                # The store changed meanwhile (written back here, or by another writer).
                (fetched,) = streams.loader.fetch([unit])
            yield unit, view.fill_chunk if fetched.data is None else fetched.data
