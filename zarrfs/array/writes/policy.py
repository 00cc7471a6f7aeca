"""Where a written chunk is encoded: the one place that decides (for reads, see
zarrfs.array.reads.policy).

- In the decoding processes (zarrfs.array.decoding.staging), off the daemon's interpreter lock
  and its threads' share of the cores, when the mount has them and the chunk pays for the
  trip: large enough (PROCESS_ENCODE_BYTES), not of Python objects, of an array whose chunks
  were measured to encode slowly (PROCESS_ENCODE_BYTES_PER_SECOND), and not so slowly that a
  worker would pass its deadline over one. Until an array's first chunk is measured, here.
- In the daemon otherwise, and whenever the processes do not encode a chunk: a worker that
  dies or is killed, an encoder that fails there or cannot be sent there, staging memory at
  its bound. The chunk is then encoded here from the same elements (the write-back still holds
  them), so a write is never lost and never stored otherwise than the daemon would store it.
  After FAILURES_TO_GIVE_UP chunks in a row that a worker could not encode (a worker killed
  does not count: its jobs go to the next one), an array's chunks stay in the daemon.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from ...codecs import BytesLike
from ..cache import Counters
from ..decoding import NoRoom, NotEncoded, ProcessEncoder, WorkerFailed
from ..stored import PlainChunkIO, encoded_here

log = logging.getLogger(__name__)
# Chunks smaller than this are encoded in the daemon: the copy into shared memory and a message
# each way cost more than their encoding there (as reads' PROCESS_CHUNK_BYTES).
PROCESS_ENCODE_BYTES = 64 << 10
# Arrays whose chunks encode faster than this (CPU, on one core) are encoded in the daemon. A
# chunk encoded in a process costs the copies in and out of shared memory, the messages and the
# worker's Python: ~0.4 ms of CPU a 512 KiB chunk, the daemon's and the worker's, which pays
# only where the encoding is dear. Measured on 2 cores under load (load average 8-11), `dd` of
# 256 MiB into uint16 arrays in 512 x 512 chunks, every chunk encoded in the processes against
# every chunk in the daemon (this constant set to 1e12, then 0), alternated, medians of 3, MB/s
# (the rates are python-zstandard's on those chunks, on one core):
# - zstd level 1 (785 MB/s): plain 186 against 195, sharded 188 against 240; CPU 1.28 against 1.05 s;
# - zstd level 3 (168 MB/s): plain 108 against 109, sharded 103 against 97; CPU 2.53 against 2.35 s
#   (and 83 against 67 plain, at load average 4-6).
# - again, zstd level 1 (load 3-3.6, 3 alternated pairs, benchmarks/cold_writes.py): plain 181
#   against 204, sharded 221 against 257; the daemon's CPU 0.82 against 1.08 s and 0.72 against
#   0.95, the processes' 0.44-0.46 more (docs/performance.md, "Where a write's time goes").
# The daemon's interpreter lock was not what held writes back there: the cores were. So zstd
# levels 1 and 2 and blosc lz4 stay here; zstd from level 3 and gzip go to the processes, where
# they cost the daemon's requests and write-back no core of their own.
PROCESS_ENCODE_BYTES_PER_SECOND = 400e6
FAILURES_TO_GIVE_UP = 3
DEADLINE_SHARE = 0.25  # chunks measured to take longer than this share of a worker's deadline stay here


class EncodePolicy:
    """The policy for one array's chunks (`encode` is its chunk I/O's `encode_with`)."""

    def __init__(self, io: PlainChunkIO, processes: ProcessEncoder | None, counters: Counters,
                 name: str) -> None:
        """`name`: the array, for the log."""
        self._io = io
        self._processes = processes
        self._counters = counters
        self._name = name
        self._refused = 0  # chunks in a row a worker could not encode

    def in_processes(self, data: np.ndarray) -> bool:
        processes = self._processes
        if (processes is None or not processes.usable or data.nbytes < PROCESS_ENCODE_BYTES
                or data.dtype.hasobject or self._refused >= FAILURES_TO_GIVE_UP):
            return False
        seconds = self._io.encode_seconds(data.nbytes)  # (0: not measured yet)
        slowly = seconds * PROCESS_ENCODE_BYTES_PER_SECOND > data.nbytes
        return slowly and seconds < processes.deadline * DEADLINE_SHARE

    def encode(self, encode: Callable[[np.ndarray], BytesLike], data: np.ndarray) -> tuple[BytesLike, float]:
        """`data` encoded where the policy says: the encoding, and the seconds it took."""
        if self._processes is not None and self.in_processes(data):
            try:
                found = self._processes.encode(self._processes.stable(encode), data)
            except NoRoom:
                pass
            except NotEncoded as e:
                self._refused += 1
                given_up = self._refused >= FAILURES_TO_GIVE_UP
                log.warning("a chunk of %s is encoded in the daemon: %s%s", self._name, e,
                            " (its chunks stay there from now on)" if given_up else "")
            except WorkerFailed as e:
                log.info("a chunk of %s is encoded in the daemon: %s", self._name, e)
            else:
                self._refused = 0
                self._counters.add(chunks_encoded_in_processes=1)
                return found
        return encoded_here(encode, data)
