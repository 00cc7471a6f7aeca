"""The chunk cache every array of a mount shares, bounded in bytes, with its shard-index
cache; the mount's counters.

Entries are keyed by (array id, read-chunk index), and indexed per array, so one array's work
(a flush, a recheck, a close) looks at its own entries only. The cache only does bookkeeping
(costs, least-recently-used order, eviction of clean entries); each array's part of it
(zarrfs.array.cache.entries) decides what goes in, and is the one user of its lock and entries.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ...grid import Index

DEFAULT_CACHE_BYTES = 256 << 20
ENTRY_OVERHEAD = 512
REUSABLE_KEYS = 1 << 16
REUSE_TRIES = 4  # candidates looked at per new chunk
CacheKey = tuple[int, Index]


@dataclass
class Fetched:
    """A read chunk as decoded (None: not stored, all fill) and the generation of the stored
    object it came from."""

    data: np.ndarray | None
    generation: str | None

    @property
    def stored(self) -> bool:
        return self.data is not None


@dataclass
class CacheEntry:
    """A read chunk in the cache: what the store held at generation `base` (when `loaded`)
    with this mount's writes on top."""

    data: np.ndarray
    nbytes: int  # what it costs the cache (0 for the shared fill chunk)
    version: int = 0  # bumped by every write
    saved_version: int = 0  # the version known to be in the store
    loaded: bool = True  # `data` holds the stored chunk; else only what was written
    base: str | None = None  # generation of the stored object `data` was read from or saved as
    written: np.ndarray | None = None  # elements written and not yet saved (to merge them again)
    unwritten: int = 0  # while not loaded: how many elements were never written
    lent: bool = False  # `data` is referenced outside the lock: writers copy before changing it
    retired: bool = False  # dropped, `data` given to another chunk (ChunkCache.buffer_for)

    @property
    def dirty(self) -> bool:
        return self.version != self.saved_version

    @property
    def whole(self) -> bool:
        """All of it was written by this mount, none of it read: it is stored whatever the
        store holds, and needs no written-mask."""
        return not self.loaded and self.unwritten == 0

    @property
    def complete(self) -> bool:
        """Every element is known: the stored chunk was read, or all of it was written."""
        return self.loaded or self.unwritten == 0


def unshared(data: np.ndarray, holders: int) -> bool:
    """Whether nothing but its `holders` known references refers to an array that owns its
    memory: no reader's view, reply, or encoder (CPython's reference count tells exactly:
    every numpy view and memoryview of it holds a reference to it)."""
    return data.base is None and sys.getrefcount(data) <= holders + 2  # (+ `data`, the argument)


class KeyedLocks:
    """One lock per chunk or shard, held only by those using it: a lock exists while a
    thread holds or waits for it (memory bounded by the threads, not the chunks).

    Not a fixed set of locks chosen by hash: two shards sharing one made a reader of a held
    shard wait for another shard's GET (~200 ms at a 20 ms round trip), and a stream needs
    every shard of its row, so about two rows in three of a sharded read over S3 waited so."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[Index, tuple[threading.Lock, int]] = {}  # -> (lock, users)

    def __len__(self) -> int:
        """How many keys are locked, or waited for, now."""
        with self._guard:
            return len(self._locks)

    @contextlib.contextmanager
    def __call__(self, chunk: Index) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(chunk) or (threading.Lock(), 0)
            self._locks[chunk] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[chunk]
                if users == 1:
                    del self._locks[chunk]
                else:
                    self._locks[chunk] = (lock, users - 1)


class SlabMemory(Protocol):
    """Where slabs' memory comes from, and goes back to: the process's heap (`HEAP`), or
    shared memory that decoding processes write into (zarrfs.array.decoding.SlabKeeper)."""

    def make(self, nbytes: int) -> np.ndarray: ...
    def forgotten(self, buffer: np.ndarray) -> None: ...


class _Heap:
    def make(self, nbytes: int) -> np.ndarray:
        return np.empty(nbytes, dtype=np.uint8)

    def forgotten(self, buffer: np.ndarray) -> None:
        return None


HEAP = _Heap()


class ChunkCache:
    """Decoded chunks of every array of a mount, under one lock and one byte limit."""

    def __init__(self, capacity: int, slabs: SlabMemory = HEAP,
                 give_back: Callable[[], object] | None = None) -> None:
        """`give_back`: returns freed memory to the system (malloc_trim), or None."""
        self.capacity = capacity
        self.lock = threading.Lock()
        self.entries: OrderedDict[CacheKey, CacheEntry] = OrderedDict()
        self.total_bytes = 0
        self.dirty_bytes = 0
        # Shard indexes: small, read for every partial read of a shard; their own budget.
        self.indexes: OrderedDict[CacheKey, Any] = OrderedDict()
        self.index_bytes = 0
        self.index_budget = max(capacity // 8, 1 << 20)
        # Buffers lent to readers ahead of them (zarrfs.array.reads.readahead): part of the limit,
        # with the spares closed slabs left for the next ones.
        self.reserved_bytes = 0
        self.spare_slabs: list[np.ndarray] = []
        self.reserve_limit = capacity // 4
        self.slabs = slabs
        # Written data not yet stored: the rest (whole shards of a sequential writer must fit).
        self.dirty_limit = capacity - self.reserve_limit
        self.give_back = give_back
        # Chunks this mount wrote and has stored, oldest first: their buffers go to new chunks.
        self.reusable: deque[CacheKey] = deque(maxlen=REUSABLE_KEYS)
        # Each array's units held, in the order they came in (a sequential writer's flush
        # stores the oldest first): owner -> units (a dict as an ordered set).
        self._owned: dict[int, dict[Index, None]] = {}
        # Bytes of chunk data and masks let go so far (dropped, or replaced by new data): the
        # daemon's trimmer gives them back to the system once enough of them piled up.
        self.freed_bytes = 0

    # Entries by key (with the lock held): every change goes through `add` and `remove`, which
    # keep the index per array in step.

    def add(self, key: CacheKey, entry: CacheEntry) -> None:
        self.entries[key] = entry
        self._owned.setdefault(key[0], {})[key[1]] = None
        self.total_bytes += entry.nbytes

    def remove(self, key: CacheKey) -> CacheEntry:
        entry = self.entries.pop(key)
        self._owned[key[0]].pop(key[1], None)
        self.release(entry.nbytes)
        return entry

    def release(self, nbytes: int) -> None:
        """Bytes no longer held (with the lock held): uncounted, and counted as freed."""
        self.total_bytes -= nbytes
        self.freed_bytes += nbytes

    def units_of(self, owner: int) -> list[Index]:
        """The read chunks of one array the cache holds (with the lock held)."""
        return list(self._owned.get(owner, ()))

    def forget_owner(self, owner: int, cost: Callable[[Any], int]) -> None:
        """An array closed (its view dropped its entries): its shard indexes go too."""
        with self.lock:
            self._owned.pop(owner, None)
        self.forget_indexes(owner, cost)

    def forget_indexes(self, owner: int, cost: Callable[[Any], int]) -> None:
        """Every shard index of one array (its shards may all have changed)."""
        with self.lock:
            for key in [k for k in self.indexes if k[0] == owner]:
                self.index_bytes -= cost(self.indexes.pop(key))

    def evict(self) -> int:
        """Drop least recently used clean entries until the cache fits its limit; the bytes
        dropped."""
        dropped = 0
        with self.lock:
            if self.total_bytes <= self.capacity:
                return 0
            for key in list(self.entries):
                entry = self.entries[key]
                if entry.dirty:
                    continue
                self.remove(key)
                dropped += entry.nbytes
                if self.total_bytes <= self.capacity:
                    break
        return dropped

    def buffer_for(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """An uninitialised buffer for a new chunk (call with the lock held): the buffer of a
        chunk this mount wrote and stored, dropped from the cache; else fresh memory.

        Fresh memory is faulted in by the kernel page by page as it is first written: 0.4 ms
        of a 1 MiB write request's 0.66 ms, and more where the host of a virtual machine takes
        the guest's free memory back (free page reporting). So a sequential writer reuses its
        stored chunks' buffers from its first chunks on: the cache holds about what is being
        written (a write of 256 MiB at cache=256M faulted in 28 MiB less, peak RSS 140 -> 110
        MiB). A stored chunk's buffer is taken only when nothing but its entry refers to it
        (no reader's view, no encoder), which CPython's reference count tells exactly: every
        numpy view and memoryview of it holds a reference. A reader that waited for the entry
        sees it `retired` and looks again."""
        for _ in range(min(REUSE_TRIES, len(self.reusable))):
            key = self.reusable[0]
            entry = self.entries.get(key)
            data = None if entry is None or entry.dirty else entry.data
            if data is None or data.base is not None or data.shape != shape or data.dtype != dtype:
                self.reusable.popleft()
            elif not unshared(data, 2):  # (the entry's and `data`)
                self.reusable.rotate(-1)  # still in use: later
            else:
                self.reusable.popleft()
                assert entry is not None
                self.remove(key)
                self.freed_bytes -= entry.nbytes  # (not freed: given to the new chunk)
                entry.retired = True
                return data
        return np.empty(shape, dtype=dtype)

    def usage(self) -> dict[str, int]:
        """What the cache holds now (`zarrfs stats`)."""
        with self.lock:
            return {"cache_bytes": self.total_bytes, "dirty_bytes": self.dirty_bytes,
                    "readahead_bytes": self.reserved_bytes, "cache_limit": self.capacity}

    def lend_slab(self, nbytes: int) -> np.ndarray | None:
        """A flat buffer of `nbytes` for a reader's slab, counted against the limit (evicting
        to make room): one a closed slab left, else fresh memory; None when readers' buffers
        already hold their share of the limit.

        Fresh slab memory comes as huge pages the kernel zeroes as they are first written:
        8% of a cold read's CPU."""
        freed: list[np.ndarray] = []
        try:
            with self.lock:
                for i, spare in enumerate(self.spare_slabs):
                    if spare.nbytes == nbytes:
                        return self.spare_slabs.pop(i)
                while self.spare_slabs and self.reserved_bytes + nbytes > self.reserve_limit:
                    freed.append(self._forget_slab(self.spare_slabs.pop(0)))
                if self.reserved_bytes + nbytes > self.reserve_limit:
                    return None
                self.reserved_bytes += nbytes
                self.total_bytes += nbytes
        finally:
            for buffer in freed:  # (outside the lock: shared memory's workers are told)
                self.slabs.forgotten(buffer)
        self.evict()
        return self.slabs.make(nbytes)

    def take_back_slab(self, buffer: np.ndarray) -> None:
        """A slab's buffer back from a closed stream: kept for the next slab while other
        slabs are out and nothing refers to it any more (no reply being sent from it, which
        CPython's reference count tells exactly); else freed, with the spares once no slab
        is out."""
        with self.lock:
            spare_bytes = sum(spare.nbytes for spare in self.spare_slabs)
            others_out = self.reserved_bytes - spare_bytes > buffer.nbytes
            if others_out and sys.getrefcount(buffer) <= 3:  # (the caller's, ours, the call's)
                self.spare_slabs.append(buffer)
                return
            freed = [self._forget_slab(buffer)]
            while self.spare_slabs and not others_out:
                freed.append(self._forget_slab(self.spare_slabs.pop()))
        for each in freed:
            self.slabs.forgotten(each)

    def _forget_slab(self, buffer: np.ndarray) -> np.ndarray:
        self.reserved_bytes -= buffer.nbytes
        self.total_bytes -= buffer.nbytes
        return buffer

    def hold(self, nbytes: int, *, give_back: bool = True) -> None:
        """Count buffers about to be made for a write-back against the limit, evicting to
        make room (it cannot wait: what is written back is what frees the cache), and give
        the memory dropped back at once: the buffers are made on other threads, whose malloc
        arenas would not reuse it (not on a request's path, where the trimmer's next round
        does it: a trim takes up to milliseconds). `hold(-nbytes)` ends it."""
        with self.lock:
            self.total_bytes += nbytes
        if nbytes > 0 and self.evict() and give_back and self.give_back is not None:
            self.give_back()

    def remember_index(self, key: CacheKey, index: Any, cost: Callable[[Any], int]) -> None:
        with self.lock:
            if key in self.indexes:
                self.index_bytes -= cost(self.indexes.pop(key))
            self.index_bytes += cost(index)
            self.indexes[key] = index
            while self.index_bytes > self.index_budget and len(self.indexes) > 1:
                _, dropped = self.indexes.popitem(last=False)
                self.index_bytes -= cost(dropped)

    def index_of(self, key: CacheKey) -> Any:
        """A cached shard index (None: not cached), now the most recently used."""
        with self.lock:
            cached = self.indexes.get(key)
            if cached is not None:
                self.indexes.move_to_end(key)
            return cached

    def forget_index(self, key: CacheKey, cost: Callable[[Any], int]) -> None:
        with self.lock:
            if key in self.indexes:
                self.index_bytes -= cost(self.indexes.pop(key))


COUNTER_NAMES = ("requests", "errors", "cache_hits", "cache_misses", "bytes_fetched", "bytes_stored",
                 "chunks_decoded", "chunks_encoded", "decode_seconds", "encode_seconds",
                 "write_conflicts", "rechecks", "chunks_changed_outside", "timeouts", "bytes_pushed",
                 "bytes_replied", "chunks_encoded_in_processes")


class Counters:
    """What a mount has done (`zarrfs stats`): numbers only, added to under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, float] = dict.fromkeys(COUNTER_NAMES, 0)

    def add(self, **amounts: float) -> None:
        with self._lock:
            for name, amount in amounts.items():
                self._values[name] += amount

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self._values)

    def activity(self) -> float:
        """A number that grows whenever the mount works: requests, and chunks decoded or
        encoded (a flush runs for a while with no request coming in)."""
        with self._lock:
            return sum(self._values[name] for name in ("requests", "chunks_decoded", "chunks_encoded"))
