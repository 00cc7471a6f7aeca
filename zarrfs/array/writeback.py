"""Writing dirty chunks back: grouped by stored object, in parallel, one directory fsync per
flush. On failure the data stays dirty for a retry, and a write is applied whole or not at
all: when the store is failing it is refused only once dirty data would exceed the cache.

Each stored object is written as a compare-and-swap (`_write_back`), so two mounts (or
another writer) that change different elements of one chunk, or different inner chunks of one
shard, never lose each other's updates."""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..codecs import BytesLike
from ..errors import ChunkError, ConflictError
from ..grid import Index
from ..store import ANY, Expect
from .cache import Entry, StripedLocks
from .chunk_io import Fetched, ShardedChunkIO, StoredShard
from .recheck import forget

if TYPE_CHECKING:
    from .core import ZarrArray

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 50


class Early:
    """Chunks (or shards) being stored ahead of a flush, as soon as this mount wrote them
    whole: their encoding overlaps the writes that follow, and a flush finds them done."""

    def __init__(self) -> None:
        self.jobs: dict[Index, Future[None]] = {}
        self.unsynced: set[Index] = set()  # stored early; their directory entries not yet synced
        self.lock = StripedLocks()  # one write-back of a chunk at a time
        # Inner chunks written whole, encoded before their shard is: the version encoded, the
        # encoding (None: all fill) and the bytes it is counted as in the cache.
        self.encoded: dict[Index, tuple[int, Future[BytesLike | None], int]] = {}
        self.encoded_bytes = 0


def flush(array: ZarrArray, *, complete_only: bool = False) -> None:
    """Write every dirty chunk of an array to the store (with `complete_only`, those that need
    no stored chunk merged in first). On failure the data stays dirty."""
    with array._flush_lock:
        _wait_for_early(array)
        with array._lock:
            groups: defaultdict[Index, list[Index]] = defaultdict(list)
            for (owner, unit), entry in array.cache.entries.items():
                if owner == array.owner and entry.dirty and (entry.complete or not complete_only):
                    groups[array.io.location(unit)[0]].append(unit)
            stored_early = set(array.early.unsynced)
        jobs: dict[Index, Future[bool]] = {
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
                array.store.sync_directories(array.chunk_key(chunk) for chunk in set(jobs) | stored_early)
            except OSError as e:
                failure = e
        if failure is not None:
            raise failure
        with array._lock:
            array.early.unsynced -= stored_early
    array.cache.evict()


def make_room(array: ZarrArray) -> None:
    """Write back before dirty data fills the cache (every array of the mount shares it):
    first wait for what is being stored already, then store what needs nothing read, then
    the rest."""
    if array.cache.dirty_bytes <= array.cache.dirty_limit:
        return
    flushes: list[Callable[[], None]] = [
        lambda: _wait_for_early(array), lambda: flush(array, complete_only=True), array.flush,
    ] + [a.flush for a in array.shared.dirty_arrays() if a is not array]
    for flush_one in flushes:
        if array.cache.dirty_bytes <= array.cache.dirty_limit:
            return
        try:
            flush_one()
        except (OSError, ChunkError):
            if array.cache.dirty_bytes > array.cache.capacity:
                raise
            log.warning("write-back failed; keeping %d dirty bytes for a retry", array.cache.dirty_bytes)


def _wait_for_early(array: ZarrArray) -> None:
    """The chunks (shards) being stored ahead of a flush free the most for the least work:
    flushing the next row of shards while they are stored writes those shards half done, to
    be read back and written again whole (a sequential write of float32/zstd shards of 64 MiB
    at cache=256M read 87 MB back and stored 130 MB for 87)."""
    for job in list(array.early.jobs.values()):
        job.result()  # (never raises: a failed early store leaves its data for the flush)


def store_early(array: ZarrArray, units: list[Index]) -> None:
    """Start storing the chunks (or shards) of `units` that this mount has written whole; of
    a shard not yet whole, start encoding those of its inner chunks."""
    held = 0
    with array._lock:
        for chunk in {array.io.location(unit)[0] for unit in units}:
            if chunk not in array.early.jobs and all(
                (e := array.cache.entries.get(array._key(u))) is not None and e.dirty and e.whole
                for u in array.io.units_of(chunk)
            ):
                array.early.jobs[chunk] = array.shared.writers.submit(_store_early, array, chunk)
        if isinstance(array.io, ShardedChunkIO):
            held = sum(_encode_early(array, array.io, unit) for unit in units
                       if array.io.location(unit)[0] not in array.early.jobs)
    if held:
        array.cache.hold(held, give_back=False)  # (on the writer's request)


def _encode_early(array: ZarrArray, io: ShardedChunkIO, unit: Index) -> int:
    """Encode an inner chunk written whole on a loader thread now, not when its shard is
    whole: a shard of many rows is whole only late in a sequential write, and slow encoders
    (zstd) would idle until then. Fast ones (blosc) keep up at the shard's write-back, where
    encoding ahead only competed with the writer (measured, every codec encoded ahead:
    zstd shards +11%, blosc shards -10%).
    Within a quarter of the cache: the bytes to hold against it until the shard is written
    (0: not encoded ahead). The chunk is lent, so a write to it meanwhile copies it first."""
    entry = array.cache.entries.get(array._key(unit))
    if entry is None or not entry.whole or unit in array.early.encoded or not io.encodes_slowly:
        return 0
    if array.early.encoded_bytes + entry.nbytes > array.cache.capacity // 4:
        return 0
    entry.lent = True
    array.early.encoded_bytes += entry.nbytes
    job = array.shared.loaders.submit(io.encode_ahead, entry.data)
    array.early.encoded[unit] = (entry.version, job, entry.nbytes)
    return entry.nbytes


def _encoded_ahead(array: ZarrArray, snapshot: _Snapshot) -> tuple[dict[Index, BytesLike | None], int]:
    """The encodings made ahead of the snapshot's inner chunks, of the versions it holds (the
    others are dropped: written since), and the bytes they are held as in the cache (to let
    go once the shard is written). Waits for those still being made."""
    with array._lock:
        taken = {u: array.early.encoded.pop(u) for u in snapshot.versions if u in array.early.encoded}
        held = sum(nbytes for _, _, nbytes in taken.values())
        array.early.encoded_bytes -= held
    ready: dict[Index, BytesLike | None] = {}
    for unit, (version, job, _) in taken.items():
        if version == snapshot.versions[unit] and job.exception() is None:
            ready[unit] = job.result()
    return ready, held


def _store_early(array: ZarrArray, chunk: Index) -> None:
    try:
        with array.shared.early_slots:
            stored = _flush_chunk(array, chunk, array.io.units_of(chunk))
        if stored:
            with array._lock:
                array.early.unsynced.add(chunk)
    except Exception as e:  # the data stays dirty: the next flush stores it or reports why not
        log.warning("storing %r ahead of a flush failed: %s", array.store.path(array.chunk_key(chunk)), e)
    finally:
        with array._lock:
            array.early.jobs.pop(chunk, None)


class WriteSlots:
    """How many write-backs of an array run at once: one per writer thread for plain chunks;
    for shards, as many as half the cache holds (at least one of each kind). A shard rebuilt
    around new inner chunks holds the stored shard, the new inner chunks and the new shard;
    one whose inner chunks are all new (a sequential writer's) is not read, and holds a third
    of that. Measured at cache=256M, a row of shards stored one at a time, then at once:
    uint16/zstd/sharded (4 shards of 32 MiB) 396-398 -> 426-430 MB/s, float32/blosc/sharded
    (2 of 64 MiB) 686 -> 722."""

    REBUILD = 3  # what a rebuild holds, in shards

    def __init__(self, writers: int, capacity: int, shard_bytes: int | None) -> None:
        self._sharded = shard_bytes is not None
        fitting = writers if shard_bytes is None else capacity // 2 // shard_bytes
        self._free = min(writers, max(self.REBUILD, fitting))  # in shards (plain: in chunks)
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def __call__(self, whole: bool) -> Iterator[None]:
        cost = self.REBUILD if self._sharded and not whole else 1
        with self._changed:
            self._changed.wait_for(lambda: self._free >= cost)
            self._free -= cost
        try:
            yield
        finally:
            with self._changed:
                self._free += cost
                self._changed.notify_all()


def _flush_chunk(array: ZarrArray, chunk: Index, units: list[Index]) -> bool:
    """Store those of `units` still dirty once no other write-back of the chunk is running;
    whether there were any."""
    with array.early.lock(chunk):
        with array._lock:
            entries = array.cache.entries
            units = [u for u in units if (e := entries.get(array._key(u))) is not None and e.dirty]
        if not units:
            return False
        whole = len(units) == len(array.io.units_of(chunk)) and _all_new(array, units)
        with array.write_slots(whole):
            _write_back(array, chunk, units)
        return True


@dataclass
class _Snapshot:
    """What one attempt of a write-back sends: each unit's data, version and written-mask
    (taken from the entry, so writes made meanwhile start a new one)."""

    entries: dict[Index, Entry]
    arrays: dict[Index, np.ndarray]
    versions: dict[Index, int]
    masks: dict[Index, np.ndarray | None]


def _write_back(array: ZarrArray, chunk: Index, units: list[Index]) -> None:
    """Store one chunk or shard as a compare-and-swap on the stored object: if another writer
    replaced it since it was read, read it again, apply this mount's unsaved writes on top and
    try again."""
    key = array.chunk_key(chunk)
    for attempt in range(MAX_ATTEMPTS):
        if attempt:  # two writers that keep colliding must not stay in step
            time.sleep(random.uniform(0, min(0.001 * 2**attempt, 0.25)))
        for unit in units:
            if not array.cache.entries[array._key(unit)].complete:
                array._wait(unit, {})  # merge with what is stored before encoding
        stored = array.io.stored_for_write(key, len(units), _all_new(array, units))
        if stored is not None and stored.known:
            if array.seen.snapshot([chunk]).get(chunk, stored.generation) != stored.generation:
                forget(array, {chunk})  # changed outside: cached inner chunks may be stale
            _rebase(array, units, stored)
        snapshot = _take(array, units)
        expect = _expected(snapshot, stored)
        ready, held = _encoded_ahead(array, snapshot)
        try:
            generation = array.io.put(key, chunk, snapshot.arrays, stored, expect, ready)
        except ConflictError:
            _give_back(array, snapshot)
            array.shared.counters.add(write_conflicts=1)
            log.info("chunk %r was changed by another writer; merging and retrying", array.store.path(key))
            if stored is None:
                _refetch(array, units)
            continue
        except BaseException:
            _give_back(array, snapshot)
            raise
        finally:
            if held:
                array.cache.hold(-held)
        _settle(array, snapshot, generation)
        return
    raise ChunkError(key, f"another writer kept changing it ({MAX_ATTEMPTS} attempts)")


def _all_new(array: ZarrArray, units: list[Index]) -> bool:
    """Whether every unit was written whole without being read (the stored one is not needed)."""
    with array._lock:
        return all(array.cache.entries[array._key(u)].whole for u in units)


def _rebase(array: ZarrArray, units: list[Index], stored: StoredShard) -> None:
    """Units read from an older version of the shard than the one about to be rewritten."""
    for unit in units:
        entry = array.cache.entries[array._key(unit)]
        if entry.loaded and entry.base != stored.generation:
            fetched = Fetched(array.io.decode_stored(stored, unit), stored.generation)
            with array._lock:
                array.merge_stored(entry, fetched)


def _refetch(array: ZarrArray, units: list[Index]) -> None:
    for unit in units:
        (fetched,) = array.fetch([unit])
        with array._lock:
            array.merge_stored(array.cache.entries[array._key(unit)], fetched)


def _take(array: ZarrArray, units: list[Index]) -> _Snapshot:
    with array._lock:
        entries = {unit: array.cache.entries[array._key(unit)] for unit in units}
        snapshot = _Snapshot(entries, {u: e.data for u, e in entries.items()},
                             {u: e.version for u, e in entries.items()},
                             {u: e.written for u, e in entries.items()})
        for entry in entries.values():
            entry.written = None
            array._recount(entry)
            entry.lent = True
    return snapshot


def _expected(snapshot: _Snapshot, stored: StoredShard | None) -> Expect:
    """The generation the put must find: the shard just read, or the one a plain chunk was
    read at. A chunk written whole without being read replaces whatever is there."""
    if stored is not None:
        return stored.generation if stored.known else ANY
    (entry,) = snapshot.entries.values()
    return entry.base if entry.loaded else ANY


def _give_back(array: ZarrArray, snapshot: _Snapshot) -> None:
    """A failed attempt: the masks taken return to their entries, with writes made since."""
    with array._lock:
        for unit, entry in snapshot.entries.items():
            taken = snapshot.masks[unit]
            if taken is None or taken is entry.written:
                continue
            entry.written = taken if entry.written is None else (taken | entry.written)
            array._recount(entry)


def _settle(array: ZarrArray, snapshot: _Snapshot, generation: str | None) -> None:
    array.seen.note(array.io.location(next(iter(snapshot.entries)))[0], generation)
    with array._lock:
        for unit, entry in snapshot.entries.items():
            saved = entry.version == snapshot.versions[unit]  # else written meanwhile: still dirty
            # A chunk written whole stays wholly this mount's while writes to it are unsaved:
            # they have no written-mask, so it must not be merged with a stored version.
            entry.loaded = saved or not entry.whole
            entry.base = generation
            if saved:
                array._count_dirty(-entry.nbytes)
                array.cache.reusable.append(array._key(unit))
            entry.saved_version = snapshot.versions[unit]
