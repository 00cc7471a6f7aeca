"""The loader threads of a mount with a disk cache (`zarrfs.array.loader_pool`): as many as
there are cores while the cache serves the reads, all of them while reads wait on the store."""

from __future__ import annotations

import threading
import time

import pytest

from zarrfs.array.loader_pool import LoaderPool

pytestmark = pytest.mark.fast


class Running:
    """Jobs that note their thread and how many of them ran at once."""

    def __init__(self) -> None:
        self.threads: set[str] = set()
        self.now = self.most = 0
        self._lock = threading.Lock()

    def job(self, seconds: float, barrier: threading.Barrier | None = None) -> None:
        with self._lock:
            self.threads.add(threading.current_thread().name)
            self.now += 1
            self.most = max(self.most, self.now)
        if barrier is not None:
            barrier.wait(timeout=10)  # (only if all of them run at once)
        time.sleep(seconds)
        with self._lock:
            self.now -= 1


def test_jobs_run_on_as_many_threads_as_cores_while_reads_are_local() -> None:
    local = True
    pool = LoaderPool(16, 2, lambda: local)
    try:
        running = Running()
        for future in [pool.submit(running.job, 0.01) for _ in range(12)]:
            future.result(timeout=10)
        assert running.most == 2 and len(running.threads) == 2, (running.most, running.threads)
        local = False  # (a read missed the cache: jobs wait on the network, many at once)
        waiting = Running()
        barrier = threading.Barrier(8)
        for future in [pool.submit(waiting.job, 0.0, barrier) for _ in range(8)]:
            future.result(timeout=10)
        assert waiting.most == 8 and not waiting.threads & running.threads
        assert list(pool.map(abs, [-1, -2, -3])) == [1, 2, 3]  # (as any executor)
    finally:
        pool.shutdown(wait=True)


def test_jobs_queued_for_the_cores_go_to_the_many_threads_after_a_miss() -> None:
    local = True
    pool = LoaderPool(16, 2, lambda: local)
    try:
        release = threading.Event()
        held = [pool.submit(release.wait, 10) for _ in range(2)]  # (both local threads busy)
        waiting = Running()
        barrier = threading.Barrier(8)
        queued = [pool.submit(waiting.job, 0.0, barrier) for _ in range(8)]
        local = False  # (a miss: the queued jobs would wait on the store two at a time)
        release.set()
        for future in held + queued:
            future.result(timeout=10)
        assert waiting.most == 8
        assert not [name for name in waiting.threads if name.startswith("zarrfs-decode-local")]
        failing = pool.submit(int, "not a number")
        local = True
        with pytest.raises(ValueError):
            failing.result(timeout=10)
        with pytest.raises(ValueError):
            pool.submit(int, "not a number either").result(timeout=10)
    finally:
        pool.shutdown(wait=True)
