"""Where a read chunk is decoded: the one place that decides.

- A chunk loaded into the cache (a read through the cache: `ChunkSource.start`) is decoded on
  the mount's loader threads, which on a remote store are many, so that its requests are in
  flight together (zarrfs.array.loader_pool).
- A stream's chunks (zarrfs.array.reads.streaming) are read by jobs, and decoded:
  - in the decoding processes (zarrfs.array.decoding), straight into the stream's slab in
    shared memory, where the mount has processes that can take this slab: chunks of a local
    store's files read by the processes themselves, whatever their size (a job names a few
    MiB of them by their grid index: `ChunkFiles`); chunks of other stores read by the
    daemon, when they are large enough to pay for the message; else
  - on one thread, when they are small and cheap to decode and read from a local store
    (SMALL_CHUNK_BYTES); once they are measured to decode slowly, on the loader threads;
  - on the loader threads otherwise: also where the processes cannot be used (none could be
    started, or the slab is the daemon's own memory), so a mount reads the same either way.
- A stream a decoding process failed (killed, or a chunk it could not decode) is given up,
  and its reader reads through the cache: the loader threads again, which report a corrupt
  chunk as such.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..decoding import ChunkFiles, SharedSlab
from ..stored import PlainChunkIO

# Chunks smaller than this that decode cheaply (chunk_io.CHEAP_DECODE_SECONDS), read from a
# local store, are decoded by one thread at a time. Each costs ~30 us of Python and system
# calls, which hold the interpreter lock; two threads at it hand the lock back and forth at
# every call. Measured, cold dd of float32 arrays with one loader against two: 4 KiB zstd
# chunks 100-142 against 73-104 MB/s, with a third less CPU; 16 KiB zstd 290-408 against
# 269-328, 16 KiB blosc 254-321 against 229-292. Not when decoding is most of the work:
# 16 KiB gzip chunks (54 us to decode) 167-202 against 242-321, 64 KiB zstd 419-527 against
# 489-594. Small chunks count as cheap until measured: most codecs decode them so.
SMALL_CHUNK_BYTES = 32 << 10
# Read chunks at least this large decode in the decoding processes when the daemon reads them
# (smaller ones cost more in messages than in decoding), a job's worth in one message.
PROCESS_CHUNK_BYTES = 64 << 10


class Lane(enum.Enum):
    """Where a stream's job runs, and so where its chunks are decoded."""

    LOADERS = "the loader threads, decoding"
    ONE_THREAD = "the one-thread lane for small chunks, decoding"
    PROCESSES = "the loader threads, reading; the decoding processes, decoding"
    FILES = "the decoding processes, reading the chunks' files and decoding"


# Decoded bytes per job: a job's worth of Python and thread hops in the daemon, at least one
# chunk; for the decoding processes, one message. A job of files is read by one process:
# smaller, so that a slab's are spread over the processes (with 4 MiB, a slab of 4 KiB chunks
# was one job, on one core).
JOB_BYTES = {Lane.LOADERS: 256 << 10, Lane.ONE_THREAD: 256 << 10, Lane.PROCESSES: 4 << 20,
             Lane.FILES: 2 << 20}


@dataclass(frozen=True)
class StreamDecoding:
    """Where one stream's chunks are decoded: its lane, and the shared memory its slab is
    when the decoding processes write into it."""

    lane: Lane
    slab: SharedSlab | None = None

    @property
    def job_bytes(self) -> int:
        return JOB_BYTES[self.lane]


class DecodePolicy:
    """The policy for one array's chunks."""

    def __init__(self, io: PlainChunkIO, round_trips: bool,
                 shared_slab: Callable[[Any], SharedSlab | None], files: ChunkFiles | None) -> None:
        """`round_trips`: a read of the store waits on the network. `shared_slab`: the shared
        memory a slab lent by the cache is, when the decoding processes can take it. `files`:
        how they read the array's chunks from its files themselves, where they may."""
        self._io = io
        self._round_trips = round_trips
        self._shared_slab = shared_slab
        self.files = files

    def for_stream(self, chunk_nbytes: int, buffer: Any) -> StreamDecoding:
        """Where a stream of chunks of `chunk_nbytes` into `buffer` (a slab) decodes them."""
        if self._io.decoder is not None and (self.files is not None or chunk_nbytes >= PROCESS_CHUNK_BYTES):
            slab = self._shared_slab(buffer)
            if slab is not None:
                return StreamDecoding(Lane.PROCESSES if self.files is None else Lane.FILES, slab)
        if chunk_nbytes < SMALL_CHUNK_BYTES and not self._round_trips:
            return StreamDecoding(Lane.ONE_THREAD)
        return StreamDecoding(Lane.LOADERS)

    def stays_on_one_thread(self) -> bool:
        """Asked as each job of the one-thread lane starts: whether the array's chunks still
        decode cheaply (measured as they decode), else the job goes to the loader threads."""
        return self._io.decodes_cheaply
