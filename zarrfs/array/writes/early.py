"""What a write-back keeps between writes: the chunks (or shards) being stored ahead of a
flush, the inner chunks encoded ahead of their shard (zarrfs.array.writes.writeback), and how many
write-backs may run at once."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import Future

from ...codecs import BytesLike
from ...grid import Index
from ..cache import KeyedLocks

Encoding = tuple[int, "Future[BytesLike | None]", int]  # version encoded, its encoding, bytes held


class Early:
    """Chunks (or shards) being stored ahead of a flush, as soon as this mount wrote them
    whole: their encoding overlaps the writes that follow, and a flush finds them done.
    Its fields change under `lock` (taken before the cache's, never inside it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.jobs: dict[Index, Future[None]] = {}
        self.unsynced: set[Index] = set()  # stored early; their directory entries not yet synced
        self.chunk_locks = KeyedLocks()  # one write-back of a chunk at a time
        # Inner chunks written whole, encoded before their shard is: the version encoded, the
        # encoding (None: all fill) and the bytes it is counted as in the cache.
        self.encoded: dict[Index, Encoding] = {}
        self.encoded_bytes = 0

    def take_encoded(self, units: Iterator[Index] | list[Index]) -> dict[Index, Encoding]:
        """The encodings made ahead of `units`, no longer this object's."""
        with self.lock:
            taken = {u: self.encoded.pop(u) for u in units if u in self.encoded}
            self.encoded_bytes -= sum(nbytes for _, _, nbytes in taken.values())
        return taken

    def stored(self, chunk: Index) -> None:
        with self.lock:
            self.unsynced.add(chunk)

    def ended(self, chunk: Index) -> None:
        with self.lock:
            self.jobs.pop(chunk, None)

    def unsynced_now(self) -> set[Index]:
        with self.lock:
            return set(self.unsynced)

    def synced(self, chunks: set[Index]) -> None:
        with self.lock:
            self.unsynced -= chunks

    def running(self) -> list[Future[None]]:
        with self.lock:
            return list(self.jobs.values())


class WriteSlots:
    """How many write-backs of an array run at once: one per writer thread for plain chunks;
    for shards, as many as half the cache holds (at least one of each kind). A shard rebuilt
    around new inner chunks holds the stored shard, the new inner chunks and the new shard;
    one whose inner chunks are all new (a sequential writer's) is not read, and holds a third
    of that. Measured at cache=256M, a row of shards stored one at a time, then at once:
    uint16/zstd/sharded (4 shards of 32 MiB) 396-398 -> 426-430 MB/s, float32/blosc/sharded
    (2 of 64 MiB) 686 -> 722."""

    REBUILD = 3  # what a rebuild holds, in shards

    def __init__(self, writers: int, capacity: int, shard_bytes: int | None) -> None:
        self._sharded = shard_bytes is not None
        fitting = writers if shard_bytes is None else capacity // 2 // shard_bytes
        self._free = min(writers, max(self.REBUILD, fitting))  # in shards (plain: in chunks)
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def __call__(self, whole: bool) -> Iterator[None]:
        cost = self.REBUILD if self._sharded and not whole else 1
        with self._changed:
            self._changed.wait_for(lambda: self._free >= cost)
            self._free -= cost
        try:
            yield
        finally:
            with self._changed:
                self._free += cost
                self._changed.notify_all()
