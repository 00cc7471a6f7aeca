"""Keeping the daemon's resident memory near what its cache holds (glibc malloc).

Chunk buffers come and go by the thousand while data flows. glibc keeps what is freed for the
next allocation, which is what makes a cold read fast, but it returns free memory inside its
heaps to the system only when asked (`malloc_trim`). Left alone, a write with cache=256M kept
about 65 MiB of freed buffers resident on top of the cache.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("zarrfs")

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD = (4 << 20) + 4096  # buffers up to a 4 MiB chunk come from the heap
TRIM_THRESHOLD = 16 << 20  # free heap kept for the next buffers (not faulted in again)
ARENAS = 4
# How often freed memory goes back while the mount is busy. Measured, a whole-array write of
# float32/blosc at cache=256M: peak RSS 375-377 MB untrimmed, 334-339 MB at 0.1 s and
# 348 MB at 0.5 s, equally fast.
TRIM_SECONDS = 0.1
IDLE_SECONDS = 1.0  # the longest sleep of an idle daemon's trimmer (and its lag once work begins)
# And sooner once the cache has let this much go: random writers free chunk buffers faster
# than every 0.1 s gave back (fio's random 4-256 KiB writes at cache=256M kept 40-60 MiB of
# freed memory resident, and went past the cache + 100 MiB bound).
FREED_BYTES = 4 << 20
FREED_CHECK_SECONDS = 0.02


def bound_malloc() -> Callable[[], int] | None:
    """Set glibc's malloc up for chunk-sized buffers; the function that gives freed memory
    back (None when this is not glibc). Call before any thread starts.

    glibc raises its mmap threshold after large frees (so any buffer may come from the heap
    and fragment it) and keeps an arena per thread: a sharded write with cache=256M peaked at
    786 MB RSS. A fixed threshold and 4 arenas bound that; the threshold is above chunk sizes
    (chunk buffers are reused from the heap, not mapped and faulted in afresh each time: a
    128 KiB threshold cost a cold read 30% of its speed) and below shard and slab sizes
    (measured peak RSS of a cold read at cache=256M: 128 KiB 325 MB, 4 MiB 332 MB, 32 MiB
    396 MB)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
        libc.mallopt(M_ARENA_MAX, ARENAS)
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError) as e:  # not glibc: its defaults stand
        log.debug("mallopt unavailable: %s", e)
        return None
    return lambda: int(trim(0))


class Trimmer:
    """Gives freed memory back every TRIM_SECONDS while `activity()` changes, and as soon as
    `freed()` (bytes the cache let go so far) grew by FREED_BYTES; while neither changes,
    looks less and less often (up to IDLE_SECONDS)."""

    def __init__(self, trim: Callable[[], int], activity: Callable[[], float],
                 freed: Callable[[], int], interval: float = TRIM_SECONDS) -> None:
        self._trim = trim
        self._activity = activity
        self._freed = freed
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="zarrfs-trim", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _run(self) -> None:
        seen, trimmed_at = self._activity(), self._freed()
        interval = self._interval
        look_at = time.monotonic() + interval
        while not self._stopped.wait(self._step(interval)):
            freed = self._freed()
            if freed - trimmed_at < FREED_BYTES and time.monotonic() < look_at - 0.001:
                continue  # (little freed, and not yet the time to look at the activity)
            now = self._activity()
            if now == seen and freed == trimmed_at:
                interval = min(2 * interval, IDLE_SECONDS)
            else:
                seen, trimmed_at, interval = now, freed, self._interval
                self._trim()
            look_at = time.monotonic() + interval

    def _step(self, interval: float) -> float:
        """How long to sleep: while busy, only until the cache's freed bytes are looked at."""
        return min(FREED_CHECK_SECONDS, interval) if interval == self._interval else interval
