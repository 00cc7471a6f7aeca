"""Watching store operations (for metrics, `zarrfs.metrics`): what each was, how it ended and
how long it took, its retries included. A store without an observer pays nothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from ..errors import StoreTimeout

T = TypeVar("T")

# What an operation was (`Store.call`'s `kind`)...
GET, GET_RANGE, PUT, DELETE, LIST, STAT, SYNC, OTHER = (
    "get", "get_range", "put", "delete", "list", "stat", "sync", "other")
KINDS = (GET, GET_RANGE, PUT, DELETE, LIST, STAT, SYNC, OTHER)
# ... and how it ended: read kinds can find nothing (a missing key is a return value).
OK, MISSING, ERROR, TIMEOUT = "ok", "missing", "error", "timeout"
OUTCOMES = (OK, MISSING, ERROR, TIMEOUT)
_READS = frozenset({GET, GET_RANGE, LIST, STAT})


class StoreObserver(Protocol):
    def started(self) -> None: ...
    def finished(self, kind: str, outcome: str, seconds: float) -> None: ...
    def retried(self, kind: str) -> None: ...


def observed(observer: StoreObserver, kind: str, run: Callable[[], T | None]) -> T | None:
    """`run()` (one store operation, retries included), reported to `observer`."""
    observer.started()
    start = time.perf_counter()
    outcome = ERROR  # (also for what is not a StoreError: a bug, a conflict, a cancellation)
    try:
        result = run()
        outcome = MISSING if result is None and kind in _READS else OK
        return result
    except StoreTimeout:
        outcome = TIMEOUT
        raise
    finally:
        observer.finished(kind, outcome, time.perf_counter() - start)
