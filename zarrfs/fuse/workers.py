"""The worker threads requests run in, and how long a request may wait for one.

Over a remote store every wait has a deadline (`timeout`, NFS's `soft` mount): a request
whose worker has not answered within `timeout` of the store's silence fails with EIO and its
worker is abandoned (its own store calls end at their own deadlines). A request waits at
least `timeout`, and longer only while the store answers: one read of 128 KiB across 512
chunks of 256 bytes is 512 GETs, and a slow store that answers each in 0.3 s must not fail
it after 1 s. Flushes have no bound as a whole: each store call they make has its own.

A request is handed to a thread through one queue and its outcome given back to the loop with
one call (`_Threads`, `_Job`): a call that does nothing there and back took 36-41 us, against
55-82 us through `trio.to_thread.run_sync` (its limiter, the thread's name set at each call, a
copy of the context), on the loaded 2-core VM; a decoded tile of data.tif, one request, takes
about 2 ms.
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import outcome
import trio

from ..errors import StoreError

T = TypeVar("T")
LOCAL_WORKERS = 8  # requests in worker threads at once: CPU work on a local store
# Over a remote store a request may sit on a worker until the store's deadline: enough
# workers that requests stalled on the network leave room for reads of cached bytes.
REMOTE_WORKERS = 48
IDLE_SECONDS = 10.0  # (a thread that had no job for this long ends)


class _Job(Generic[T]):
    """`function(*args)` for a worker thread, whose outcome wakes the task waiting for it
    (unless it stopped waiting: abandoned)."""

    def __init__(self, function: Callable[..., T], args: tuple[Any, ...]) -> None:
        self._call = function, args
        self._token = trio.lowlevel.current_trio_token()
        self._task = trio.lowlevel.current_task()
        self._abandoned = False

    def run(self) -> None:
        function, args = self._call
        found = outcome.capture(function, *args)
        with contextlib.suppress(trio.RunFinishedError):  # (the mount ended while it ran)
            self._token.run_sync_soon(self._deliver, found)

    def _deliver(self, found: outcome.Outcome[T]) -> None:
        if not self._abandoned:
            trio.lowlevel.reschedule(self._task, found)

    def abandon(self, raise_cancel: Any) -> trio.lowlevel.Abort:
        self._abandoned = True
        return trio.lowlevel.Abort.SUCCEEDED


class _Threads:
    """Up to `count` threads taking jobs from one queue: started as jobs come, each ending
    once idle for IDLE_SECONDS (as trio's threads do)."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._jobs: queue.SimpleQueue[_Job[Any]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._busy = 0  # (jobs put and not yet done)

    def put(self, job: _Job[Any]) -> None:
        with self._lock:  # (with the job queued: a thread ending idle sees it and stays)
            self._busy += 1
            start = self._busy > self._threads and self._threads < self._count
            self._threads += start
            self._jobs.put(job)
        if start:
            threading.Thread(target=self._serve, name="zarrfs-request", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._jobs.empty():  # (else a job came as the wait ended: take it)
                        self._threads -= 1
                        return
                continue
            try:
                job.run()
            finally:
                with self._lock:
                    self._busy -= 1


class Workers:
    def __init__(self, timeout: float | None, on_timeout: Callable[[], None],
                 silence: Callable[[], float] = lambda: math.inf) -> None:
        """`timeout`: the store's deadline (None: no bound, a local store). `silence`: how
        long the store has not answered, in seconds."""
        self.timeout = timeout
        self._on_timeout = on_timeout
        self._silence = silence
        self._threads = _Threads(LOCAL_WORKERS if timeout is None else REMOTE_WORKERS)
        self._waiting: dict[trio.CancelScope, float] = {}  # (when each began waiting)

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` in a worker; over a remote store, abandoned with StoreError (EIO)
        when it has not answered within the store's deadline of silence (`keep_deadlines`)."""
        if self.timeout is None:
            return await self._run(function, *args)
        with trio.CancelScope() as waiting:
            self._waiting[waiting] = trio.current_time()
            try:
                return await self._run(function, *args, abandon_on_cancel=True)
            finally:
                del self._waiting[waiting]
        self._on_timeout()
        raise StoreError(None, f"no answer from the store within {self.timeout:g} s")

    async def _run(self, function: Callable[..., T], *args: Any, abandon_on_cancel: bool = False) -> T:
        """`function(*args)` on one of the threads, waited for (`abandon_on_cancel`: until the
        wait is cancelled, the thread left to finish)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        job = _Job(function, args)
        self._threads.put(job)
        found: T = await trio.lowlevel.wait_task_rescheduled(
            job.abandon if abandon_on_cancel else lambda _: trio.lowlevel.Abort.FAILED)
        return found

    async def keep_deadlines(self) -> None:
        """While serving: each waiting request fails `timeout` after it began or after the
        store's silence began, whichever is later. Decided when due with the silence read
        then, never from an earlier look (a store that answered since is waited for)."""
        if self.timeout is None:
            return
        while True:
            now = trio.current_time()
            heard = now - self._silence()
            due = now + self.timeout  # (a request that begins from now is due later)
            for waiting, began in list(self._waiting.items()):
                expires = max(began, heard) + self.timeout
                if expires <= now:
                    waiting.cancel()
                else:
                    due = min(due, expires)
            await trio.sleep_until(due)

    async def flush(self, function: Callable[[], None]) -> None:
        """A flush in a worker: each store call it makes has the store's deadline, the whole
        flush none."""
        await self._run(function)
