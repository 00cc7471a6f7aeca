"""Watching store operations (for metrics, `zarrfs.metrics`, and the request log): what each
was, which key it named, how many objects it covered, how it ended and how long it took, its
retries included. A store without an observer pays nothing."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sized
from dataclasses import dataclass
from typing import IO, Protocol, TypeVar

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
    def finished(self, operation: Operation) -> None: ...
    def retried(self, kind: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Operation:
    """One store operation as it ended. `objects`: how many objects it covered (a batch of
    reads, the entries a listing returned); a request each on an object store, a page of a
    thousand for a listing."""

    kind: str
    key: str
    outcome: str
    seconds: float
    objects: int


def observed(observer: StoreObserver, kind: str, key: str, run: Callable[[], T | None], *,
             objects: int = 1) -> T | None:
    """`run()` (one store operation on `key`, retries included, covering `objects` objects:
    a listing, however many it returned), reported to `observer`."""
    observer.started()
    start = time.perf_counter()
    outcome = ERROR  # (also for what is not a StoreError: a bug, a conflict, a cancellation)
    try:
        result = run()
        outcome = MISSING if result is None and kind in _READS else OK
        if kind == LIST:
            objects = len(result) if isinstance(result, Sized) else 0
        return result
    except StoreTimeout:
        outcome = TIMEOUT
        raise
    finally:
        observer.finished(Operation(kind, key, outcome, time.perf_counter() - start, objects))


class Observers:
    """Several observers as one (metrics and the request log)."""

    def __init__(self, *observers: StoreObserver) -> None:
        self.observers = observers

    def started(self) -> None:
        for observer in self.observers:
            observer.started()

    def finished(self, operation: Operation) -> None:
        for observer in self.observers:
            observer.finished(operation)

    def retried(self, kind: str) -> None:
        for observer in self.observers:
            observer.retried(kind)


REQUEST_LOG_VARIABLE = "ZARRFS_REQUEST_LOG"


class RequestLog:
    """A line per store operation, as it ends: `KIND OUTCOME OBJECTS KEY` (tab-separated).
    What an access costs the store, counted: the tests and benchmarks of cost by chunk count
    read it. Asked for with ZARRFS_REQUEST_LOG=FILE in the daemon's environment (appended to)."""

    def __init__(self, file: IO[str]) -> None:
        self._file = file
        self._lock = threading.Lock()

    @classmethod
    def from_environment(cls) -> RequestLog | None:
        path = os.environ.get(REQUEST_LOG_VARIABLE)
        return None if not path else cls(open(path, "a", encoding="utf-8"))  # (open while the daemon runs)

    def started(self) -> None:
        return None

    def finished(self, operation: Operation) -> None:
        line = f"{operation.kind}\t{operation.outcome}\t{operation.objects}\t{operation.key}\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()  # (read while the mount runs)

    def retried(self, kind: str) -> None:
        return None

    def close(self) -> None:
        self._file.close()
