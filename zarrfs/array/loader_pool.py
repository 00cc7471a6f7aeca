"""The loader threads of a mount of a remote store with a disk cache: many, so that the
requests of a cold read are in flight together; but while the disk cache serves the reads
(nothing waits on the network), as many as there are cores.

Thirty-two threads decoding chunks read from local disk on two cores finish the rows a
reader waits for no sooner than the rows ahead of it, and each job runs on a thread whose
memory and caches have gone cold. Measured (`benchmarks/disk_cache.py`'s arrays, 256 MiB, a
warm `dd`): 0.66x of a local copy's speed with 32 threads, 0.66x with 32 threads of which
two ran at once, 0.77-0.79x with two threads. Each job goes to the pool the cache's latest
reads choose when it is submitted, and a job queued for the few threads goes to the many when
it starts after a miss. No job waits on another of the same pool (a pool of one thread serves
a mount), so neither pool's size can hold one back."""

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
        if not self._served_locally():
            return self._waiting.submit(fn, *args, **kwargs)
        done: Future[T] = Future()
        self._local.submit(self._start, done, fn, args, kwargs)
        return done

    def _start(self, done: Future[T], fn: Callable[..., T], args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> None:
        """Run a job on a local thread; or, when reads wait on the store again (a miss since it
        was submitted), hand it to the many threads: a wrong guess costs the jobs running."""
        if not done.set_running_or_notify_cancel():
            return
        if self._served_locally():
            _settle(done, fn, args, kwargs)
        else:
            self._waiting.submit(_settle, done, fn, args, kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        for pool in (self._local, self._waiting):  # (the local one hands jobs to the other)
            pool.shutdown(wait, cancel_futures=cancel_futures)


def _settle(done: Future[T], fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    try:
        result = fn(*args, **kwargs)
    except BaseException as e:  # (as a pool's own job: the error is the future's)
        done.set_exception(e)
    else:
        done.set_result(result)
