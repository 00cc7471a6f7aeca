"""The server's threads: cheroot's pool, grown while connections wait for a thread and shrunk
back to its minimum once the threads it grew sit idle.

cheroot hands a connection to a thread as soon as it is accepted (and a kept-alive one as soon
as it is readable), and the thread then reads its request; its pool keeps the threads it
started with (it never grows by itself). So a few silent clients held every thread. Here a
thread (`PoolGrower`, beside the connection manager) grows the pool by what waits plus `SPARE`,
up to the pool's maximum, whenever a connection is handed over with fewer idle threads than
that; each silent client holds its thread only until its first-line deadline (`deadlines`).

Why threads rather than an event loop that waits for a request's head without a thread (as
nginx does): cheroot's public API has no way to keep a connection in its selector until its
head is whole, nor to hand a thread a connection with the bytes another loop read of it; and
a TLS connection's head cannot be peeked at before its handshake, which would then have to be
made without blocking too. A waiting thread costs little: about 26 KiB of PSS (its stack's
touched pages and a frame or two; measured with 100 held), 3 MiB for the pool's maximum.
"""

from __future__ import annotations

import threading
import time

from cheroot.workers.threadpool import ThreadPool

SPARE = 4  # idle threads kept ready beyond the connections waiting
SHRINK_SECONDS = 30.0  # the pool shrinks back to its minimum after this long with threads to spare
CHECK_SECONDS = 1.0  # how often the pool is looked at when nothing is handed over


class PoolGrower:
    """Keeps a thread ready for each connection handed to `pool`; not started by the pool."""

    def __init__(self, pool: ThreadPool) -> None:
        self._pool = pool
        self._handed = threading.Event()
        self._stopped = False
        self._short_at = time.monotonic()  # (when the pool last had too few idle threads)
        self._thread = threading.Thread(target=self._run, name="server threads", daemon=True)
        self._thread.start()

    def handed(self) -> None:
        """A connection was put in the pool's queue."""
        self._handed.set()

    def stop(self) -> None:
        self._stopped = True
        self._handed.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stopped:
            self._handed.wait(CHECK_SECONDS)
            self._handed.clear()
            if not self._stopped:
                self._fit()

    def _fit(self) -> None:
        now, idle = time.monotonic(), self._pool.idle
        short = self._pool.qsize + SPARE - idle
        if short > 0:
            self._short_at = now
            self._pool.grow(short)  # (not past the pool's maximum)
        elif idle > SPARE and now - self._short_at > SHRINK_SECONDS:
            self._pool.shrink(idle - SPARE)  # (not below the pool's minimum)
