"""Where a written chunk is encoded: the one place that decides (for reads, see
zarrfs.array.reads.policy).

- In the decoding processes (zarrfs.array.decoding.staging), off the daemon's interpreter lock,
  when the mount has them and the chunk pays for the trip: large enough (PROCESS_ENCODE_BYTES),
  of an array whose chunks encode slowly (chunk_io.encodes_slowly: zstd, gzip; not blosc lz4 or
  no compression, which encode faster than the copy into shared memory costs), of elements
  that are not Python objects, and not so slowly that a worker would pass its deadline.
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
        return (processes is not None and processes.usable and data.nbytes >= PROCESS_ENCODE_BYTES
                and not data.dtype.hasobject and self._refused < FAILURES_TO_GIVE_UP
                and self._io.encodes_slowly
                and self._io.encode_seconds(data.nbytes) < processes.deadline * DEADLINE_SHARE)

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
