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
        self._waiting: dict[trio.CancelScope, float] = {}  # (when each began waiting)

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` in a worker; over a remote store, abandoned with StoreError (EIO)
        when it has not answered within the store's deadline of silence (`keep_deadlines`)."""
        if self.timeout is None:
            return await trio.to_thread.run_sync(function, *args, limiter=self._limiter)
        with trio.CancelScope() as waiting:
            self._waiting[waiting] = trio.current_time()
            try:
                return await trio.to_thread.run_sync(function, *args, limiter=self._limiter,
                                                     abandon_on_cancel=True)
            finally:
                del self._waiting[waiting]
        self._on_timeout()
        raise StoreError(None, f"no answer from the store within {self.timeout:g} s")

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
        await trio.to_thread.run_sync(function, limiter=self._limiter)
