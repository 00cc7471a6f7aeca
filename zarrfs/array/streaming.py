"""Streaming a region into a caller's buffer: jobs on the mount's loader threads, each
decoding a few read chunks (inner chunks of one shard read with one request where they lie
next to each other) and copying their parts straight into the buffer.

A sequential reader would otherwise pay for assembling every reply from ~32 cached pieces
on the request path. A stream takes chunks from the cache (with this mount's unsaved writes),
and decodes the others without caching them.

A stream is a snapshot: it is `current` while the array's `mutations` count is what it was
when the stream began. Every change to an array's elements, cached or stored, bumps that count
after the change is made, so a stream that overlapped a change is never used.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from ..grid import Box, Index, Piece, cells_of

if TYPE_CHECKING:
    from .chunk_io import Fetched
    from .core import ZarrArray


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
# On S3, the chunks of a job are fetched together: a GET waited for on the event loop costs
# a loader ~0.3 ms of Python besides the request (fsspec's sync, the thread hops); four at a
# time, ~0.1 ms each. Measured, 512 GETs of 512 KiB chunks from 32 threads: 0.52 s of CPU
# one at a time, 0.39 s four at a time. At most S3_JOB_CHUNKS in flight a job.
S3_JOB_BYTES = 2 << 20
S3_JOB_CHUNKS = 16


class Stream:
    """A buffer (`out`, shaped like `box`) being filled with the array's elements of `box`.

    The buffer is lent by the cache (ChunkCache.lend_slab) from `start` until `close` (or,
    when jobs are still writing into it then, until the last of them ends). Once given back it
    may be another slab's: readers take its bytes only through `piece`, which closing ends."""

    def __init__(self, array: ZarrArray, box: Box, buffer: np.ndarray) -> None:
        self._array = array
        self._buffer: np.ndarray | None = buffer
        self.out: np.ndarray | None = buffer.view(array.data_type.storage).reshape(box.shape)
        self.stamp = array.mutations
        self.error: BaseException | None = None
        self._closed = False
        self._finished = threading.Event()
        self._lock = threading.Lock()
        jobs = _jobs(array, box)
        self._left = len(jobs)
        if not jobs:
            self._finished.set()
        # (Loads from a remote store wait on the network: they want every loader.)
        small = array.read_chunk.nbytes < SMALL_CHUNK_BYTES and array.store.is_local
        for job in jobs:
            if small:
                array.shared.small_chunk_lane.submit(self._fill_small, job)
            else:
                array.shared.loaders.submit(self._fill, job)

    @classmethod
    def start(cls, array: ZarrArray, box: Box) -> Stream | None:
        """A stream of `box`, or None when readers' buffers hold their share of the cache."""
        buffer = array.cache.lend_slab(box.size * array.data_type.storage.itemsize)
        return None if buffer is None else cls(array, box, buffer)

    @property
    def done(self) -> bool:
        return self._finished.is_set()

    @property
    def current(self) -> bool:
        """Finished without error, and no element of the array changed since it began."""
        return self.done and self.error is None and self._array.mutations == self.stamp

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
            self._array.cache.take_back_slab(buffer)

    def _given_up(self) -> np.ndarray | None:
        """The buffer, no longer this stream's (with the lock held, once closed and finished)."""
        buffer, self._buffer, self.out = self._buffer, None, None
        return buffer

    def _fill_small(self, pieces: list[Piece]) -> None:
        """On the small-chunk lane; on the loaders while the chunks decode slowly (the one
        place that decides: the cost is measured as jobs run)."""
        if self._array.io.decodes_cheaply:
            self._fill(pieces)
        else:
            self._array.shared.loaders.submit(self._fill, pieces)

    def _fill(self, pieces: list[Piece]) -> None:
        out = self.out
        assert out is not None  # (given up only when every job has ended)
        together = _fetched_together(self._array, pieces)
        try:
            if together:
                self._array.io.read_together(together)
            for run in _by_stored_object(self._array, pieces):
                if self._closed or self.error is not None:
                    break
                by_unit = {piece.cell: piece for piece in run}
                for unit, chunk in chunks_for_stream(self._array, list(by_unit)):
                    out[by_unit[unit].in_box] = chunk[by_unit[unit].in_cell]
        except BaseException as e:  # reported through `error`: the reader falls back
            self.error = e
        finally:
            self._array.io.let_go(together)
        del out
        with self._lock:
            self._left -= 1
            if self._left:
                return
            if self._closed and self.error is None:
                self.error = CancelledStream()
            buffer = self._given_up() if self._closed else None
            if buffer is not None:
                self._array.cache.take_back_slab(buffer)
            self._finished.set()


class CancelledStream(Exception):
    """The stream was cancelled before all of it was filled."""


def _jobs(array: ZarrArray, box: Box) -> list[list[Piece]]:
    """The pieces of `box`, a job's worth at a time: small chunks several to a job (a job
    costs more than decoding a 4 KiB chunk); the inner chunks of one shard together, so that
    those lying next to each other are read with one request."""
    pieces = list(cells_of(box, array.read_chunk_shape))
    chunk_bytes = max(1, array.read_chunk.nbytes)
    if array.sharding is None:
        per_job = max(1, JOB_BYTES // chunk_bytes)
        if array.store.is_s3:
            per_job = min(S3_JOB_CHUNKS, max(1, S3_JOB_BYTES // chunk_bytes))
        return [pieces[i : i + per_job] for i in range(0, len(pieces), per_job)]
    per_job = max(1, SHARD_JOB_BYTES // chunk_bytes)
    return [run[i : i + per_job] for run in _by_stored_object(array, pieces)
            for i in range(0, len(run), per_job)]


def _fetched_together(array: ZarrArray, pieces: list[Piece]) -> list[str]:
    """The keys of a job's plain chunks the cache does not hold, which S3 fetches all at once
    (see S3_JOB_BYTES)."""
    if array.sharding is not None or not array.store.is_s3 or len(pieces) <= 1:
        return []
    with array.cache.lock:
        entries = [array.cache.entries.get((array.owner, piece.cell)) for piece in pieces]
    return [array.chunk_key(piece.cell) for piece, entry in zip(pieces, entries, strict=True)
            if entry is None or not entry.complete]


def _by_stored_object(array: ZarrArray, pieces: list[Piece]) -> list[list[Piece]]:
    """Pieces grouped by the chunk or shard they are stored in (in the order first met)."""
    found: dict[Index, list[Piece]] = {}
    for piece in pieces:
        found.setdefault(array.io.location(piece.cell)[0], []).append(piece)
    return list(found.values())


def chunks_for_stream(array: ZarrArray, units: list[Index]) -> Iterator[tuple[Index, np.ndarray]]:
    """Read chunks' elements (all of one stored object), in no particular order: cached (with
    this mount's unsaved writes), or decoded here, those the cache does not hold read together
    and decoded one at a time (so a job holds one decoded chunk, whatever its size).

    A chunk the cache does not hold is not put there: a stream reads its chunks once, in
    order, and the page cache keeps what the reader got. Decoding into a buffer freed at once
    reuses the same memory chunk after chunk, where filling the cache faults in fresh pages
    for every byte streamed (a cold read 20-25% slower). A chunk partly written by this mount
    is merged into its entry, as a load does. Never waits for another job: on a loader thread
    that could be one queued behind this one."""
    cached: list[tuple[Index, np.ndarray]] = []
    partly_written: set[Index] = set()
    with array._lock:
        for unit in units:
            entry = array.cache.entries.get(array._key(unit))
            if entry is not None and entry.complete:
                entry.lent = True
                cached.append((unit, entry.data))
            elif entry is not None:
                partly_written.add(unit)
    yield from cached
    have = {unit for unit, _ in cached}
    missing = [unit for unit in units if unit not in have]
    if missing:
        array.shared.counters.add(cache_misses=len(missing))
        chunk = array.io.location(missing[0])[0]
        array.io.read_ahead(array.chunk_key(chunk), chunk)  # (remote shards: fetched whole)
        if array.sharding is not None and chunk and chunk[0] + 1 < array.grid_shape[0]:
            # (a stream goes down the first axis: the shard below is next)
            below = (chunk[0] + 1, *chunk[1:])
            array.io.read_early(array.chunk_key(below), below)
        for unit, fetched in zip(missing, array.fetch(missing), strict=True):
            if unit in partly_written:
                yield unit, _merge(array, unit, fetched)
            else:
                yield unit, array._fill_chunk if fetched.data is None else fetched.data


def _merge(array: ZarrArray, unit: Index, fetched: Fetched) -> np.ndarray:
    with array._lock:
        entry = array._install(unit, fetched)  # (or the entry a concurrent load installed)
        entry.lent = True
        data = entry.data
    array.cache.evict()
    return data
