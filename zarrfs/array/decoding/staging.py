"""The daemon's end of encoding in the decoding processes (issue 87): a written chunk's elements
are copied into a staging buffer of shared memory, a worker encodes them there and writes the
encoding over them (zarrfs.array.decoding.encoding), and the daemon copies the encoding out:
the encoding is off the daemon's interpreter lock, and the daemon's threads only wait for it.

The copies, beside encoding in the daemon: the elements into the buffer (GIL-free memcpy, a
tenth of zstd-1's time to encode them), the encoding into it in the worker (the encoders
return new bytes) and out of it here; none through the socket, which carries a hundred bytes
a chunk. The encoding is copied out rather than lent from the buffer: an inner chunk encoded
ahead of its shard waits for the shard's write-back (a row of shards, 128 MiB of a sequential
writer's), and lent buffers made new ones, each faulted in afresh: a sharded `dd` of 256 MiB
ran at 170-191 MB/s lent against 186-237 encoding in the daemon, and at 204-225 copied out
against 184-210 (alternated runs, load average 5).

Staging buffers are used again job after job (their pages stay mapped here and in the
workers, faulted in once), within `budget` bytes (past it, `NoRoom`: the chunk is encoded in
the daemon); at most `spare` bytes of them wait unused, the rest are freed."""

from __future__ import annotations

import pickle
import threading
import types

import numpy as np

from .encoding import Encoder
from .pool import DEADLINE_SECONDS, DecodePool
from .slabs import SharedSlab

SIZE_STEP = 64 << 10  # staging buffers come in multiples of this (a chunk of the array fits the last one)


class NotEncoded(Exception):
    """A chunk no worker encoded (the daemon is to): its encoder is not picklable or failed
    there, or the staging buffers in use hold their budget (`NoRoom`)."""


class NoRoom(NotEncoded):
    """The staging buffers in use hold their budget."""


class ProcessEncoder:
    """The mount's staging buffers, and its chunks' encoding in the decoding processes."""

    def __init__(self, pool: DecodePool, budget: int, spare: int) -> None:
        self.pool = pool
        self._budget = budget
        self._spare_limit = spare
        self._lock = threading.Lock()
        self._spare: list[SharedSlab] = []
        self._held = 0  # bytes of staging buffers, in use or spare
        self._closed = False
        self._encoders: dict[tuple[int, str], Encoder] = {}

    @property
    def usable(self) -> bool:
        return self.pool.usable

    @property
    def deadline(self) -> float:
        """The seconds a worker may take over a job before it is stopped (and the job failed)."""
        return DEADLINE_SECONDS

    def encode(self, encoder: Encoder, data: np.ndarray) -> tuple[memoryview, float]:
        """`data` encoded by `encoder` (picklable) in a worker: the encoding (a flat uint8
        array's view), and the worker's CPU seconds.
        NotEncoded (a worker could not encode it, or no room for it), or WorkerFailed (the worker
        died: zarrfs.array.decoding.pool): nothing was encoded."""
        try:
            key = self.pool.key_of(encoder)
        except (pickle.PicklingError, TypeError, AttributeError) as e:
            raise NotEncoded(f"its encoder cannot be sent to a worker: {e}") from None
        capacity = data.nbytes + data.nbytes // 64 + 4096  # (what any encoder adds, and more)
        slab = self._take(capacity)
        try:
            staged = np.frombuffer(slab.map, dtype=np.uint8)
            np.copyto(staged[: data.nbytes].view(data.dtype).reshape(data.shape), data)
            future = self.pool.submit_job("encode", (key, slab.id, data.shape, data.dtype, capacity),
                                          [encoder], [slab])
            size, seconds = future.result()
            if size < 0:
                raise NotEncoded(f"a worker could not encode it: {seconds}")
            # (copied out: the buffer is used again at once, where an encoding made ahead of its
            # shard would hold it until the shard is written)
            encoded = np.empty(size, dtype=np.uint8)
            np.copyto(encoded, staged[:size])
        except BaseException:
            self._free(slab)  # (a worker lost in the middle of it may have written into it)
            raise
        self._give_back(slab)
        return encoded.data, seconds

    def stable(self, encoder: Encoder) -> Encoder:
        """The one object a worker knows an encoder by: `pipeline.encode` is a new bound
        method at each access (the pool keys its pickles by the object)."""
        if isinstance(encoder, types.MethodType):
            key = (id(encoder.__self__), encoder.__func__.__name__)
        else:
            key = (id(encoder), "")
        with self._lock:  # (the first one kept: it holds its object, whose id stays its own)
            return self._encoders.setdefault(key, encoder)

    def _take(self, capacity: int) -> SharedSlab:
        size = -(-capacity // SIZE_STEP) * SIZE_STEP
        with self._lock:
            for i, slab in enumerate(self._spare):
                if slab.nbytes == size:
                    return self._spare.pop(i)
            while self._spare and self._held + size > self._budget:
                self._forget(self._spare.pop(0))
            if self._held + size > self._budget:
                raise NoRoom(f"staging buffers hold {self._held} bytes")
            self._held += size
        try:
            return SharedSlab(size)
        except BaseException:
            with self._lock:
                self._held -= size
            raise

    def _give_back(self, slab: SharedSlab) -> None:
        """A buffer no longer used: kept as a spare, within their limit."""
        with self._lock:
            spare = slab.nbytes + sum(kept.nbytes for kept in self._spare)
            if not self._closed and spare <= self._spare_limit:
                self._spare.append(slab)
            else:
                self._forget(slab)

    def _free(self, slab: SharedSlab) -> None:
        with self._lock:
            self._forget(slab)

    def _forget(self, slab: SharedSlab) -> None:
        """(With the lock held.) Its memory goes once no view of it is left, here and in the workers."""
        self._held -= slab.nbytes
        self.pool.forget_slab(slab)

    def close(self) -> None:
        """Every spare freed (those in use go as their jobs end)."""
        with self._lock:
            self._closed = True
            while self._spare:
                self._forget(self._spare.pop())


