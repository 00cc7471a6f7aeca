"""Streaming a region into a caller's buffer: jobs, each taking a few read chunks from the
array's chunk source (inner chunks of one shard read with one request where they lie next to
each other) and putting their parts straight into the buffer: decoded on the job's thread, or
handed to a decoding process that decodes them into the buffer in shared memory, as the
decoding policy (zarrfs.array.reads.policy) says.

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
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np

from ...errors import ZarrfsError
from ...grid import Box, Index, Piece
from ..decoding import DecodePool, Item, close_files
from ..geometry import Geometry
from ..shared import Shared
from ..stored import Encoded
from .jobs import by_stored_object, plan_jobs
from .policy import DecodePolicy, Lane
from .source import ChunkSource

log = logging.getLogger(__name__)


class Streams:
    """The streams of one array: what they read from (its chunk source, and through it its
    cache view, chunk I/O and store), where they decode (its policy) and the worker failures
    already reported."""

    def __init__(self, source: ChunkSource, shared: Shared) -> None:
        self.source = source
        self.view = source.view
        self.io = source.io
        self.store = source.store
        self.shared = shared
        self.policy = DecodePolicy(source.io, source.store.capabilities.round_trips, shared.shared_slab)
        self._reported: set[type[BaseException]] = set()
        self._reported_lock = threading.Lock()

    def stored_in(self, cell: Index) -> Index:
        """The chunk or shard a read chunk is stored in."""
        return self.io.location(cell)[0]

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
        decoding = streams.policy.for_stream(read_chunk_nbytes, buffer)
        self._slab = decoding.slab  # (the decoding processes decode into it, if any)
        self.stamp = view.mutations
        self.error: BaseException | None = None
        self._closed = False
        self._pins = 0  # (readers of the buffer outside `piece`: pushes into the page cache)
        self._finished = threading.Event()
        self._lock = threading.Lock()
        jobs = plan_jobs(list(geometry.cells_of(box)), read_chunk_nbytes, streams.stored_in,
                         sharded=streams.source.sharded, batched_gets=streams.store.capabilities.batched_gets,
                         by_processes=self._slab is not None)
        self._left = len(jobs)
        if not jobs:
            self._finished.set()
        for job in jobs:
            if decoding.lane is Lane.ONE_THREAD:
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

    def pin(self) -> bool:
        """Keep the buffer this stream's until `unpin`, even once closed (its pieces read
        meanwhile stay its bytes); False when already closed."""
        with self._lock:
            if self._closed:
                return False
            self._pins += 1
            return True

    def unpin(self) -> None:
        with self._lock:
            self._pins -= 1
        self._give_back_if_done()

    def close(self) -> None:
        """Skip the chunks not yet started and give the buffer back (once the jobs writing
        into it and the pins have ended)."""
        with self._lock:
            self._closed = True
        self._give_back_if_done()

    def _give_back_if_done(self) -> None:
        with self._lock:
            buffer = self._given_up() if self._finished.is_set() else None  # else the last job
        if buffer is not None:
            self._streams.view.mount.take_back_slab(buffer)

    def _given_up(self) -> np.ndarray | None:
        """The buffer, once no longer this stream's: closed, finished and not pinned (with
        the lock held); else None."""
        if not self._closed or self._pins:
            return None
        buffer, self._buffer, self.out = self._buffer, None, None
        return buffer

    def _fill_small(self, pieces: list[Piece]) -> None:
        """On the small-chunk lane; on the loaders once the chunks decode slowly."""
        if self._streams.policy.stays_on_one_thread():
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
        together = streams.source.fetched_together(geometry, [piece.cell for piece in pieces])
        unchecked: dict[str, str] = {}
        decoding: list[tuple[Future[float], int]] = []  # (a job's decoding, its chunks)
        items: list[Item] = []
        try:
            if together:
                unchecked = streams.io.read_together(together, early=early and not streams.view.dirty_bytes)
            for run in by_stored_object(pieces, streams.stored_in):
                if self._closed or self.error is not None:
                    break
                by_unit = {piece.cell: piece for piece in run}
                by_process = self._slab is not None
                for unit, chunk in streams.source.for_stream(geometry, list(by_unit), by_process):
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
            buffer = self._given_up()
            if buffer is not None:
                self._streams.view.mount.take_back_slab(buffer)
            self._finished.set()


class CancelledStream(Exception):
    """The stream was cancelled before all of it was filled."""
