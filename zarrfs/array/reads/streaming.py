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

from ...codecs import place, sent
from ...errors import ZarrfsError
from ...grid import Box, Index, Piece
from ..decoding import REFERRED, DecodePool, FilesJob, FilesRead, Item, close_files, states_of
from ..geometry import Geometry
from ..shared import Shared
from ..stored import Encoded
from .jobs import by_stored_object, plan_jobs
from .policy import DecodePolicy, Lane
from .source import ChunkSource

log = logging.getLogger(__name__)


class Streams:
    """The streams of one array: what they read from (its chunk source, and through it its
    array cache, chunk I/O and store), where they decode (its policy) and the worker failures
    already reported."""

    def __init__(self, source: ChunkSource, shared: Shared) -> None:
        self.source = source
        self.array_cache = source.array_cache
        self.io = source.io
        self.store = source.store
        self.shared = shared
        self.policy = DecodePolicy(source.io, source.store.capabilities.round_trips, shared.shared_slab,
                                   source.chunk_files())
        self._reported: set[type[BaseException]] = set()
        self._reported_lock = threading.Lock()

    def stored_in(self, cell: Index) -> Index:
        """The chunk or shard a read chunk is stored in."""
        return self.io.location(cell)[0]

    def start(self, geometry: Geometry, box: Box, read_chunk_nbytes: int,
              dtype: np.dtype[Any]) -> Stream | None:
        """A stream of `box` as elements of `dtype` (the array's, in any byte order: swapped
        as chunks are copied in), or None when readers' buffers hold their share of the cache."""
        buffer = self.array_cache.mount.lend_slab(box.size * dtype.itemsize)
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
        array_cache = streams.array_cache
        self.out: np.ndarray | None = buffer.view(dtype).reshape(box.shape)
        decoding = streams.policy.for_stream(read_chunk_nbytes, buffer)
        self._slab = decoding.slab  # (the decoding processes decode into it, if any)
        self.stamp = array_cache.mutations
        self.error: BaseException | None = None
        self._closed = False
        self._pins = 0  # (readers of the buffer outside `piece`: pushes into the page cache)
        self._finished = threading.Event()
        self._lock = threading.Lock()
        jobs = plan_jobs(list(geometry.cells_of(box)), read_chunk_nbytes, streams.stored_in,
                         sharded=streams.source.sharded, batched_gets=streams.store.capabilities.batched_gets,
                         job_bytes=decoding.job_bytes)
        self._left = len(jobs)
        if not jobs:
            self._finished.set()
        small = decoding.lane is Lane.ONE_THREAD
        lane = streams.shared.small_chunk_lane if small else streams.shared.loaders
        fill = {Lane.ONE_THREAD: self._fill_small, Lane.FILES: self._fill_from_files}.get(decoding.lane,
                                                                                          self._fill)
        for job in jobs:
            lane.submit(fill, job)

    @property
    def done(self) -> bool:
        return self._finished.is_set()

    @property
    def current(self) -> bool:
        """Finished without error, and no element of the array changed since it began."""
        return self.done and self.error is None and self._streams.array_cache.mutations == self.stamp

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
            self._streams.array_cache.mount.take_back_slab(buffer)

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
                unchecked = streams.source.read_together(together, early=early)
            for run in by_stored_object(pieces, streams.stored_in):
                if self._closed or self.error is not None:
                    break
                by_unit = {piece.cell: piece for piece in run}
                by_process = self._slab is not None
                for unit, chunk in streams.source.for_stream(geometry, list(by_unit), by_process):
                    piece = by_unit[unit]
                    if isinstance(chunk, np.ndarray):
                        place(out[piece.in_box], chunk[piece.in_cell])
                    else:
                        items.append(self._item(chunk, piece))
            if items and self.error is None:
                decoding.append((self._decoders.submit(items), len(items)))
                items = []  # (the pool's now: it closes their files)
        except BaseException as e:  # reported through `error`: the reader falls back
            self._failed(e)
        finally:
            close_files(items)
            streams.source.let_go(together)
        del out, items
        self._when_decoded(decoding, lambda: self._decoded(pieces, unchecked))

    def _fill_from_files(self, pieces: list[Piece]) -> None:
        """A job of chunks a decoding process reads from their files (zarrfs.array.decoding.
        files): those the cache holds are copied here; chunks with this mount's unsaved writes
        in them, a shard whose store reports no generation, or a store that lends no directory
        now make it a job of the loaders'."""
        streams, by_unit = self._streams, {piece.cell: piece for piece in pieces}
        since, read = streams.source.seen.clock(), None
        if self._closed or self.error is not None:  # (as `_fill` skips the chunks not yet started)
            self._job_ended()
            return
        try:
            cells = self._copy_cached(by_unit)
            job = self._files_job(cells) if cells else None
            directory = None if job is None else streams.source.lend_directory()
            if cells is None or (cells and directory is None):
                self._fill(pieces)
                return
            if job is not None and directory is not None:
                assert self._slab is not None and streams.policy.files is not None
                read = self._decoders.read_files(streams.policy.files, directory, self._slab, job)
        except BaseException as e:  # (reported through `error`: the reader falls back)
            self._failed(e)
        if read is None:
            self._job_ended()
        else:
            read.add_done_callback(lambda done: self._files_read(done, list(cells or ()), by_unit, since))

    def _copy_cached(self, by_unit: dict[Index, Piece]) -> list[Index] | None:
        """Copy the chunks the cache holds into the buffer; the others, or None when some hold
        this mount's unsaved writes (merged with what is stored: the loaders')."""
        assert self.out is not None  # (given up only when every job has ended)
        cached, partly_written = self._streams.array_cache.lend_cached(list(by_unit))
        if partly_written:
            return None
        for unit, chunk in cached:
            place(self.out[by_unit[unit].in_box], chunk[by_unit[unit].in_cell])
        have = {unit for unit, _ in cached}
        return [unit for unit in by_unit if unit not in have]

    def _files_job(self, cells: list[Index]) -> FilesJob | None:
        """The job of `cells` for a decoding process; None where their shard's store reports no
        generation (nobody could tell a rewrite from the index read)."""
        assert self.out is not None  # (given up only when every job has ended)
        source, dtype = self._streams.source, self.out.dtype
        shard = source.shard_part(self._geometry, cells) if source.sharded else None
        if source.sharded and shard is None:
            return None
        fill = np.asarray(self._streams.array_cache.fill_element).astype(dtype).tobytes()
        return FilesJob(self._slab.id if self._slab else 0, tuple(self._box.shape), sent(dtype),
                        tuple(self._box.start), cells, fill, shard)

    def _files_read(self, done: Future[FilesRead], cells: list[Index], by_unit: dict[Index, Piece],
                    since: int) -> None:
        """A process read a job's files: noted, and those it left to the daemon read by the
        loaders (the job ends with them), or the job ends."""
        referred: list[Piece] = []
        try:
            found = done.result()
            self._streams.source.files_read(self._geometry, cells, found, since)
            referred = [by_unit[cell] for cell in states_of(found, cells, REFERRED)]
        except BaseException as e:  # (a process failed, or a chunk is missing: the reader falls back)
            self._failed(e)
        if referred and not self._closed and self.error is None:
            try:
                self._streams.shared.loaders.submit(self._fill, referred, False)
                return
            except RuntimeError as e:  # (the loaders were shut down: the mount is stopping)
                self._failed(e)
        self._job_ended()

    @property
    def _decoders(self) -> DecodePool:
        found = self._streams.shared.decoders
        assert found is not None  # (a shared slab: the mount has them)
        return found

    def _item(self, chunk: Encoded, piece: Piece) -> Item:
        """A chunk for a decoding process: into the slab, where the piece goes."""
        assert self._slab is not None and self.out is not None
        return Item(self._streams.io.decoder, chunk.data or b"", self._slab, tuple(self._box.shape),
                    sent(self.out.dtype), piece.in_box, piece.in_cell, chunk.opened)

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
            confirmed = self._streams.source.confirm(unchecked)
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
                self._streams.array_cache.mount.take_back_slab(buffer)
            self._finished.set()


class CancelledStream(Exception):
    """The stream was cancelled before all of it was filled."""
