"""The worker threads requests run in, and how long a request may wait for one.

Over a remote store every wait has a deadline (`timeout`, NFS's `soft` mount): a request
whose worker has not answered by then fails with EIO and its worker is abandoned (its own
store calls end at the same deadline). Flushes are the exception: each store call they make
is bounded, but a flush of much data to a slow store that answers may take longer than one.
"""

from __future__ import annotations

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
    def __init__(self, timeout: float | None, on_timeout: Callable[[], None]) -> None:
        """`timeout`: the store's deadline (None: no bound, a local store)."""
        self.timeout = timeout
        self._on_timeout = on_timeout
        self._limiter = trio.CapacityLimiter(LOCAL_WORKERS if timeout is None else REMOTE_WORKERS)

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` in a worker; over a remote store, abandoned with StoreError (EIO)
        when it has not answered within the store's deadline."""
        if self.timeout is None:
            return await trio.to_thread.run_sync(function, *args, limiter=self._limiter)
        with trio.move_on_after(self.timeout):
            return await trio.to_thread.run_sync(function, *args, limiter=self._limiter,
                                                 abandon_on_cancel=True)
        self._on_timeout()
        raise StoreError(None, f"no answer from the store within {self.timeout:g} s")

    async def flush(self, function: Callable[[], None]) -> None:
        """A flush in a worker: each store call it makes has the store's deadline, the whole
        flush none."""
        await trio.to_thread.run_sync(function, limiter=self._limiter)
