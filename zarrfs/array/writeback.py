"""Writing dirty chunks back: grouped by stored object, in parallel, one directory fsync per
flush. On failure the data stays dirty for a retry, and a write is applied whole or not at
all: when the store is failing it is refused only once dirty data would exceed the cache."""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ChunkError
from ..grid import Index
from .cache import Entry

if TYPE_CHECKING:
    from .core import ZarrArray

log = logging.getLogger(__name__)


class WriteBack:
    """The write-back half of ZarrArray (a mixin: it shares the array's cache entries)."""

    _flush_lock: threading.Lock
    _write_slots: threading.BoundedSemaphore
    _dirty_bytes: int

    @property
    def dirty_bytes(self) -> int:
        return self._dirty_bytes

    def flush(self: ZarrArray) -> None:
        """Write every dirty chunk to the store. On failure the data stays dirty for a retry."""
        with self._flush_lock:
            with self._lock:
                groups: defaultdict[Index, list[Index]] = defaultdict(list)
                for (owner, unit), entry in self.cache.entries.items():
                    if owner == self.owner and entry.dirty:
                        groups[self.io.location(unit)[0]].append(unit)
            jobs: dict[Index, Future[None]] = {
                chunk: self.shared.writers.submit(self._flush_chunk, chunk, units)
                for chunk, units in groups.items()
            }
            failure: Exception | None = None
            for chunk, job in jobs.items():
                try:
                    job.result()
                except (OSError, ChunkError) as e:
                    log.error("write-back of %r failed: %s", self.store.path(self.chunk_key(chunk)), e)
                    failure = failure or e
            if failure is None:
                try:
                    self.store.sync_directories(self.chunk_key(chunk) for chunk in jobs)
                except OSError as e:
                    failure = e
            if failure is not None:
                raise failure
        self.cache.evict()

    def _make_room(self: ZarrArray) -> None:
        """Write back before dirty data fills the cache (every array of the mount shares it)."""
        if self.cache.dirty_bytes <= self.cache.capacity // 2:
            return
        arrays: list[Callable[[], None]] = [self.flush] + [
            a.flush for a in self.shared.dirty_arrays() if a is not self]
        for flush in arrays:
            try:
                flush()
            except (OSError, ChunkError):
                if self.cache.dirty_bytes > self.cache.capacity:
                    raise
                log.warning("write-back failed; keeping %d dirty bytes for a retry", self.cache.dirty_bytes)

    def _flush_chunk(self: ZarrArray, chunk: Index, units: list[Index]) -> None:
        with self._write_slots:
            self._write_back(chunk, units)

    def _write_back(self: ZarrArray, chunk: Index, units: list[Index]) -> None:
        for unit in units:
            if self.cache.entries[self._key(unit)].written is not None:
                self._wait(unit, {})  # merge with what is stored before encoding
        with self._lock:
            snapshot: dict[Index, Entry] = {unit: self.cache.entries[self._key(unit)] for unit in units}
            versions = {unit: entry.version for unit, entry in snapshot.items()}
            arrays: dict[Index, np.ndarray] = {unit: entry.data for unit, entry in snapshot.items()}
            for entry in snapshot.values():
                entry.flushing = True
        self.io.put(self.chunk_key(chunk), chunk, arrays)
        with self._lock:
            for unit, entry in snapshot.items():
                if entry.data is arrays[unit]:
                    entry.flushing = False
                if entry.version == versions[unit]:  # else written meanwhile: still dirty
                    self._count_dirty(-entry.nbytes)
                entry.saved_version = versions[unit]
