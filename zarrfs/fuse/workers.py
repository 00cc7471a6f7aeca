"""The worker threads requests run in, and how long a request may wait for one.

Over a remote store every wait has a deadline (`timeout`, NFS's `soft` mount): a request
whose worker has not answered within `timeout` of the store's silence fails with EIO and its
worker is abandoned (its own store calls end at their own deadlines). A request waits at
least `timeout`, and longer only while the store answers: one read of 128 KiB across 512
chunks of 256 bytes is 512 GETs, and a slow store that answers each in 0.3 s must not fail
it after 1 s. Flushes have no bound as a whole: each store call they make has its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import trio

from ..errors import StoreError

T = TypeVar("T")
LOCAL_WORKERS = 8  # requests in worker threads at once: CPU work on a local store
# Over a remote store a request may sit on a worker until the store's deadline: enough
# workers that requests stalled on the network leave room for reads of cached bytes.
REMOTE_WORKERS = 48


class Workers:
    def __init__(self, timeout: float | None, on_timeout: Callable[[], None],
                 silence: Callable[[], float] = lambda: math.inf) -> None:
        """`timeout`: the store's deadline (None: no bound, a local store). `silence`: how
        long the store has not answered, in seconds."""
        self.timeout = timeout
        self._on_timeout = on_timeout
        self._silence = silence
        self._limiter = trio.CapacityLimiter(LOCAL_WORKERS if timeout is None else REMOTE_WORKERS)
        self._waiting: set[trio.CancelScope] = set()

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` in a worker; over a remote store, abandoned with StoreError (EIO)
        when it has not answered within the store's deadline of silence (`keep_deadlines`)."""
        if self.timeout is None:
            return await trio.to_thread.run_sync(function, *args, limiter=self._limiter)
        with trio.CancelScope(deadline=trio.current_time() + self.timeout) as waiting:
            self._waiting.add(waiting)
            try:
                return await trio.to_thread.run_sync(function, *args, limiter=self._limiter,
                                                     abandon_on_cancel=True)
            finally:
                self._waiting.discard(waiting)
        self._on_timeout()
        raise StoreError(None, f"no answer from the store within {self.timeout:g} s")

    async def keep_deadlines(self) -> None:
        """While serving: the waiting requests' deadlines follow the store's answers, each
        `timeout` after the last one (never sooner than its own). Looked at 4 times a timeout,
        so a request may fail after 3/4 of a timeout's silence, never after more than one."""
        if self.timeout is None:
            return
        while True:
            await trio.sleep(self.timeout / 4)
            left = self.timeout - self._silence()
            if left > 0:
                later = trio.current_time() + left
                for waiting in self._waiting:
                    waiting.deadline = max(waiting.deadline, later)

    async def flush(self, function: Callable[[], None]) -> None:
        """A flush in a worker: each store call it makes has the store's deadline, the whole
        flush none."""
        await trio.to_thread.run_sync(function, limiter=self._limiter)
