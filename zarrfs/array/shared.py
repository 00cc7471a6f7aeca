"""What every array of a mount shares: one chunk cache bounded in bytes (zarrfs.array.cache),
one set of worker threads, its decoding processes (zarrfs.array.decoding: a daemon's, when
it could fork them) and the mount's counters. N arrays never mean N pools or N caches."""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .cache import DEFAULT_CACHE_BYTES, HEAP, ChunkCache, Counters
from .decoding import DecodePool, ProcessEncoder, SharedSlab, SlabKeeper
from .loader_pool import LoaderPool
from .stored import index_cost


class Shared:
    """The cache and worker threads of one mount (or of one array used on its own)."""

    def __init__(self, cache_bytes: int = DEFAULT_CACHE_BYTES, threads: int | None = None, *,
                 fill_missing_reads: bool = True, store_fill_chunks: bool = False,
                 served_locally: Callable[[], bool] | None = None,
                 decoders: DecodePool | None = None, give_back: Callable[[], object] | None = None) -> None:
        """`fill_missing_reads`, `store_fill_chunks`: TensorStore's fill_missing_data_reads and
        store_data_equal_to_fill_value, for every array of the mount. `served_locally`: whether
        a disk cache serves the reads of a remote store now (`LoaderPool`). `decoders`: the
        processes that decode readers' slabs in shared memory (None: decoded here).
        `give_back`: returns the memory the cache frees to the system (malloc_trim)."""
        self.fill_missing_reads = fill_missing_reads
        self.store_fill_chunks = store_fill_chunks
        self._slabs = SlabKeeper(decoders.forget_slab) if decoders is not None else None
        self.cache = ChunkCache(cache_bytes, HEAP if self._slabs is None else self._slabs, give_back)
        self.counters = Counters()
        self.threads = threads or os.cpu_count() or 2
        self.loaders = (ThreadPoolExecutor(self.threads, "zarrfs-decode", _named) if served_locally is None
                        else LoaderPool(self.threads, os.cpu_count() or 2, served_locally))
        # Streams of small chunks decode one job at a time (zarrfs.array.reads.streaming).
        self.small_chunk_lane = ThreadPoolExecutor(1, "zarrfs-decode-small")
        # Write-back encodes (GIL-free in the compressors) and waits on fsync: more threads.
        self.writer_count = 4 * self.threads + 4
        self.writers = ThreadPoolExecutor(self.writer_count, "zarrfs-write", _named)
        # Chunks stored ahead of a flush, at once: enough to keep every core encoding while
        # others wait on fsync; more would only hold more encoded buffers. Threads of their
        # own, not a semaphore over the writers: a row of 32 chunks whole held 12 writers, 8
        # of them waiting their turn (and none left for a flush), woken one by one through
        # Python's Condition.
        self.early_writers = ThreadPoolExecutor(2 * self.threads, "zarrfs-early", _named)
        self._ids = itertools.count(1)
        self._arrays: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        # Figures of the mount's other parts for `stats` (the disk cache's: -o disk_cache).
        self.more_stats: list[Callable[[], dict[str, float]]] = []
        self.decoders = decoders
        # Written chunks encoded in the decoding processes (zarrfs.array.writes.policy), each
        # through a staging buffer while a worker encodes it: an eighth of the cache at most
        # (512 KiB chunks: 56 at cache=256M, where 14 threads encode at once), a sixteenth kept.
        self.encoders = None if decoders is None else ProcessEncoder(
            decoders, budget=cache_bytes // 8, spare=min(cache_bytes // 16, 32 << 20))

    def shared_slab(self, buffer: Any) -> SharedSlab | None:
        """The shared memory a slab lent by the cache is (None: the daemon's own)."""
        usable = self._slabs is not None and self.decoders is not None and self.decoders.usable
        return self._slabs.of(buffer) if usable and self._slabs is not None else None

    def register(self, array: Any) -> int:
        owner = next(self._ids)
        self._arrays[owner] = array
        return owner

    def unregister(self, owner: int) -> None:
        """An array closed (its part of the cache dropped its entries first)."""
        self._arrays.pop(owner, None)
        self.cache.forget_owner(owner, index_cost)

    def stats(self) -> dict[str, float]:
        """The counters, and what the cache holds now (`zarrfs stats`)."""
        found = {**self.counters.snapshot(), **self.cache.usage()}
        for figures in self.more_stats:
            found.update(figures())
        return found

    def dirty_arrays(self) -> list[Any]:
        return [a for a in list(self._arrays.values()) if a.dirty_bytes]

    def close(self) -> None:
        self.small_chunk_lane.shutdown(wait=True)  # (first: it hands jobs to the loaders)
        self.loaders.shutdown(wait=True)
        self.early_writers.shutdown(wait=True)
        self.writers.shutdown(wait=True)  # (the decoding processes are their starter's to stop)
        if self.encoders is not None:
            self.encoders.close()


def _named() -> None:
    """A pool thread's name shown by the system too (/proc/PID/task/TID/comm, `top -H`): what
    tells the write-back's and loaders' CPU from the requests' (benchmarks/cold_writes.py)."""
    with contextlib.suppress(OSError), open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as comm:
        comm.write(threading.current_thread().name[:15])
