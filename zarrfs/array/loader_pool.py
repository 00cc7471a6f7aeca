"""The loader threads of a mount of a remote store with a disk cache: many, so that the
requests of a cold read are in flight together; but while the disk cache serves the reads
(nothing waits on the network), as many as there are cores.

Thirty-two threads decoding chunks read from local disk on two cores finish the rows a
reader waits for no sooner than the rows ahead of it, and each job runs on a thread whose
memory and caches have gone cold. Measured (`benchmarks/disk_cache.py`'s arrays, 256 MiB, a
warm `dd`): 0.66x of a local copy's speed with 32 threads, 0.66x with 32 threads of which
two ran at once, 0.77-0.79x with two threads. Each job goes to the pool the cache's latest
reads choose when it is submitted; no job waits on another of the same pool (a pool of one
thread serves a mount), so neither pool's size can hold one back."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class LoaderPool(Executor):
    """`threads` threads for jobs that may wait on the store, and `cores` for those submitted
    while `served_locally()` (the disk cache served the latest reads without a request)."""

    def __init__(self, threads: int, cores: int, served_locally: Callable[[], bool]) -> None:
        self._waiting = ThreadPoolExecutor(threads, "zarrfs-decode")
        self._local = ThreadPoolExecutor(max(1, min(cores, threads)), "zarrfs-decode-local")
        self._served_locally = served_locally

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        pool = self._local if self._served_locally() else self._waiting
        return pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        for pool in (self._waiting, self._local):
            pool.shutdown(wait, cancel_futures=cancel_futures)
