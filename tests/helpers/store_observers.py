"""Store observers (the interface of the daemon's metrics: `zarrfs.store.observe`) for tests
that count a store's operations: `Calls` every operation's kind, `Listings` the prefixes
listed apart from the rest."""

from __future__ import annotations

import threading

from zarrfs.store.observe import Operation


class Calls:
    """A store observer (the metrics' interface) that counts operations by kind."""

    def __init__(self) -> None:
        self.kinds: list[str] = []

    def started(self) -> None:
        pass

    def finished(self, operation: Operation) -> None:
        self.kinds.append(operation.kind)

    def retried(self, kind: str) -> None:
        pass


class Listings:
    """A store observer: the prefixes listed, and every other kind of operation."""

    def __init__(self) -> None:
        self.listed: list[str] = []
        self.others: list[str] = []
        self.begun = 0
        self._lock = threading.Lock()

    def started(self) -> None:
        with self._lock:
            self.begun += 1

    def finished(self, operation: Operation) -> None:
        with self._lock:
            (self.listed if operation.kind == "list" else self.others).append(operation.key)

    def retried(self, kind: str) -> None:
        pass

    def rows(self) -> set[int]:
        with self._lock:
            return {int(key.rstrip("/").rsplit("/", 1)[1]) for key in self.listed}
