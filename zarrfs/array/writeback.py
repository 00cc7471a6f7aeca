"""Writing dirty chunks back: grouped by stored object, in parallel, one directory fsync per
flush. On failure the data stays dirty for a retry, and a write is applied whole or not at
all: when the store is failing it is refused only once dirty data would exceed the cache."""

from __future__ import annotations

import logging
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


def flush(array: ZarrArray) -> None:
    """Write every dirty chunk of an array to the store. On failure the data stays dirty."""
    with array._flush_lock:
        with array._lock:
            groups: defaultdict[Index, list[Index]] = defaultdict(list)
            for (owner, unit), entry in array.cache.entries.items():
                if owner == array.owner and entry.dirty:
                    groups[array.io.location(unit)[0]].append(unit)
        jobs: dict[Index, Future[None]] = {
            chunk: array.shared.writers.submit(_flush_chunk, array, chunk, units)
            for chunk, units in groups.items()
        }
        failure: Exception | None = None
        for chunk, job in jobs.items():
            try:
                job.result()
            except (OSError, ChunkError) as e:
                log.error("write-back of %r failed: %s", array.store.path(array.chunk_key(chunk)), e)
                failure = failure or e
        if failure is None:
            try:
                array.store.sync_directories(array.chunk_key(chunk) for chunk in jobs)
            except OSError as e:
                failure = e
        if failure is not None:
            raise failure
    array.cache.evict()

def make_room(array: ZarrArray) -> None:
    """Write back before dirty data fills the cache (every array of the mount shares it)."""
    if array.cache.dirty_bytes <= array.cache.capacity // 2:
        return
    flushes: list[Callable[[], None]] = [array.flush] + [
        a.flush for a in array.shared.dirty_arrays() if a is not array]
    for flush_one in flushes:
        try:
            flush_one()
        except (OSError, ChunkError):
            if array.cache.dirty_bytes > array.cache.capacity:
                raise
            log.warning("write-back failed; keeping %d dirty bytes for a retry", array.cache.dirty_bytes)


def _flush_chunk(array: ZarrArray, chunk: Index, units: list[Index]) -> None:
    with array._write_slots:
        _write_back(array, chunk, units)


def _write_back(array: ZarrArray, chunk: Index, units: list[Index]) -> None:
    for unit in units:
        if array.cache.entries[array._key(unit)].written is not None:
            array._wait(unit, {})  # merge with what is stored before encoding
    with array._lock:
        snapshot: dict[Index, Entry] = {unit: array.cache.entries[array._key(unit)] for unit in units}
        versions = {unit: entry.version for unit, entry in snapshot.items()}
        arrays: dict[Index, np.ndarray] = {unit: entry.data for unit, entry in snapshot.items()}
        for entry in snapshot.values():
            entry.flushing = True
    array.io.put(array.chunk_key(chunk), chunk, arrays)
    with array._lock:
        for unit, entry in snapshot.items():
            if entry.data is arrays[unit]:
                entry.flushing = False
            if entry.version == versions[unit]:  # else written meanwhile: still dirty
                array._count_dirty(-entry.nbytes)
            entry.saved_version = versions[unit]
