"""Writing dirty chunks back: grouped by stored object, in parallel, one directory fsync per
flush. On failure the data stays dirty for a retry, and a write is applied whole or not at
all: when the store is failing it is refused only once dirty data would exceed the cache.

Each stored object is written as a compare-and-swap (`_write_back`), so two mounts (or
another writer) that change different elements of one chunk, or different inner chunks of one
shard, never lose each other's updates."""

from __future__ import annotations

import contextlib
import logging
import math
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass

from ...codecs import BytesLike
from ...errors import ChunkError, ConflictError
from ...grid import Index
from ...store import ANY, Expect, Store
from ..cache import Fetched, WriteSnapshot
from ..geometry import Geometry
from ..reads import ChunkSource
from ..recheck import Rechecker
from ..shared import Shared
from ..stored import PlainChunkIO, ShardedChunkIO, StoredShard
from .early import Early, WriteSlots
from .policy import EncodePolicy

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 50
ROOM_MARGIN = 8  # making room stores this fraction of the cache beyond the dirty limit


class WriteBack:
    """One array's write-back: flushes, chunks stored early, and the slots they take."""

    def __init__(self, source: ChunkSource, rechecker: Rechecker, shared: Shared,
                 geometry: Callable[[], Geometry]) -> None:
        self.source = source
        self.array_cache = source.array_cache
        self.io: PlainChunkIO = source.io
        self.store: Store = source.store
        self.rechecker = rechecker
        self.shared = shared
        self.geometry = geometry
        self.early = Early()
        self._flush_lock = threading.Lock()
        self.encoding = EncodePolicy(self.io, shared.encoders, shared.counters, self.store.path(""))
        self.io.encode_with = self.encoding.encode
        description = geometry().description
        shard_bytes = math.prod(description.chunk_shape) * description.data_type.itemsize
        self.write_slots = WriteSlots(shared.writer_count, self.array_cache.mount.capacity,
                                      shard_bytes if isinstance(self.io, ShardedChunkIO) else None)
        self._chunk_bytes = shard_bytes  # (a plain chunk's, or a shard's)

    def flush(self, *, complete_only: bool = False, most: int | None = None) -> None:
        """Write every dirty chunk of the array to the store (with `complete_only`, those that
        need no stored chunk merged in first; with `most`, the least recently used first until
        they hold that many bytes, with the rest of their shards). On failure the data stays
        dirty."""
        with self._flush_lock:
            self._wait_for_early()
            groups: defaultdict[Index, list[Index]] = defaultdict(list)
            for unit in self.array_cache.dirty_units(complete_only=complete_only, most=most):
                groups[self.io.location(unit)[0]].append(unit)
            if most is not None:  # (a shard is stored whole: its other dirty chunks with it)
                dirty_among = self.array_cache.dirty_among
                groups.update({chunk: dirty_among(self.io.units_of(chunk)) for chunk in groups})
            stored_early = self.early.unsynced_now()
            for _ in range(MAX_ATTEMPTS):
                displaced = self._store_and_sync(groups, stored_early)
                if not displaced:
                    break
                groups = defaultdict(list, {chunk: groups[chunk] for chunk in displaced})
            else:
                key = self.geometry().chunk_key(next(iter(groups)))
                raise ChunkError(key, f"other writers' commits kept displacing it ({MAX_ATTEMPTS} attempts)")
            self.early.synced(stored_early)
        self.array_cache.mount.evict()

    def _store_and_sync(self, groups: dict[Index, list[Index]], stored_early: set[Index]) -> set[Index]:
        """Store the chunks of `groups` and make them durable; those another writer's commit
        displaced between their put and the commit (a store that commits at syncs: to merge
        and store again). A store that commits at syncs settles chunks only once committed."""
        geometry, deferred = self.geometry(), self.store.capabilities.commits
        jobs: dict[Index, Future[Written | None]] = {
            chunk: self.shared.writers.submit(self._flush_chunk, chunk, units, deferred)
            for chunk, units in groups.items()
        }
        written: list[Written] = []
        failure: Exception | None = None
        for chunk, job in jobs.items():
            try:
                done = job.result()
                written += [done] if done is not None else []
            except (OSError, ChunkError) as e:
                log.error("write-back of %r failed: %s", self.store.path(geometry.chunk_key(chunk)), e)
                failure = failure or e
        displaced: set[Index] = set()
        try:
            if failure is None:
                self.store.sync_directories(geometry.chunk_key(chunk) for chunk in set(jobs) | stored_early)
        except ConflictError as e:
            displaced = {w.chunk for w in written if geometry.chunk_key(w.chunk) in e.keys}
            if len(displaced) < len(e.keys):  # (one not in this flush: stored early, settled)
                failure = ChunkError(e.key, "displaced by another writer's commit")
        except OSError as e:
            failure = e
        for done in written if deferred else ():
            if failure is not None or done.chunk in displaced:
                self.array_cache.give_back(done.snapshot)  # (dirty again: stored at the next attempt)
            else:
                self._settle(done)
        if failure is not None:
            raise failure
        return displaced

    def make_room(self) -> None:
        """Write back before dirty data fills the cache (every array of the mount shares it):
        first wait for what is being stored already, then store the least recently written
        chunks, those that need nothing read first, down to a margin under the limit, then
        the rest. Not every dirty chunk: a random writer of `data` dirties a row of chunks
        with each write, and storing them all each time the cache filled rewrote every chunk
        it held for a dozen writes (fio's random 4-256 KiB writes of `data`, plain zstd
        chunks, cache=256M, medians of 3 pairs: psync 4.6 -> 5.3 MiB/s, mmap 6.2 -> 7.1)."""
        cache = self.array_cache.mount
        if cache.dirty_bytes <= cache.dirty_limit:
            return
        room = cache.dirty_limit - cache.capacity // ROOM_MARGIN
        flushes: list[Callable[[], None]] = [
            self._wait_for_early,
            lambda: self.flush(complete_only=True, most=cache.dirty_bytes - room),
            lambda: self.flush(most=cache.dirty_bytes - room), self.flush,
        ] + [a.flush for a in self.shared.dirty_arrays() if a.owner != self.array_cache.owner]
        for flush_one in flushes:
            if cache.dirty_bytes <= cache.dirty_limit:
                return
            try:
                flush_one()
            except (OSError, ChunkError):
                if cache.dirty_bytes > cache.capacity:
                    raise
                log.warning("write-back failed; keeping %d dirty bytes for a retry", cache.dirty_bytes)

    def _wait_for_early(self) -> None:
        """The chunks (shards) being stored ahead of a flush free the most for the least work:
        flushing the next row of shards while they are stored writes those shards half done,
        to be read back and written again whole (a sequential write of float32/zstd shards of
        64 MiB at cache=256M read 87 MB back and stored 130 MB for 87)."""
        for job in self.early.running():
            job.result()  # (never raises: a failed early store leaves its data for the flush)

    # -- early -----------------------------------------------------------------------------------

    def store_early(self, units: list[Index]) -> None:
        """Start storing the chunks (or shards) of `units` that this mount has written whole;
        of a shard not yet whole, start encoding those of its inner chunks."""
        held = 0
        early, io = self.early, self.io
        with early.lock:
            for chunk in {io.location(unit)[0] for unit in units}:
                if chunk not in early.jobs and self.array_cache.all_whole(io.units_of(chunk), dirty=True):
                    early.jobs[chunk] = self.shared.early_writers.submit(self._store_early, chunk)
            if isinstance(io, ShardedChunkIO):
                held = sum(self._encode_early(io, unit) for unit in units
                           if io.location(unit)[0] not in early.jobs)
        if held:
            self.array_cache.mount.hold(held, give_back=False)  # (on the writer's request)

    def _encode_early(self, io: ShardedChunkIO, unit: Index) -> int:
        """Encode an inner chunk written whole on a loader thread now, not when its shard is
        whole: a shard of many rows is whole only late in a sequential write, and slow
        encoders (zstd) would idle until then. Fast ones (blosc) keep up at the shard's
        write-back, where encoding ahead only competed with the writer (measured, every codec
        encoded ahead: zstd shards +11%, blosc shards -10%).
        Within a quarter of the cache: the bytes to hold against it until the shard is
        written (0: not encoded ahead). The chunk is lent, so a write to it meanwhile copies
        it first. (With the early lock held.)"""
        early = self.early
        if unit in early.encoded or not io.encodes_slowly:
            return 0
        budget = self.array_cache.mount.capacity // 4
        lent = self.array_cache.lend_whole(unit, lambda nbytes: early.encoded_bytes + nbytes <= budget)
        if lent is None:
            return 0
        data, version, nbytes = lent
        early.encoded_bytes += nbytes
        early.encoded[unit] = (version, self.shared.loaders.submit(io.encode_ahead, data), nbytes)
        return nbytes

    def _encoded_ahead(self, snapshot: WriteSnapshot) -> tuple[dict[Index, BytesLike | None], int]:
        """The encodings made ahead of the snapshot's inner chunks, of the versions it holds
        (the others are dropped: written since), and the bytes they are held as in the cache
        (to let go once the shard is written). Waits for those still being made."""
        taken = self.early.take_encoded(list(snapshot.versions))
        ready: dict[Index, BytesLike | None] = {}
        for unit, (version, job, _) in taken.items():
            if version == snapshot.versions[unit] and job.exception() is None:
                ready[unit] = job.result()
        return ready, sum(nbytes for _, _, nbytes in taken.values())

    def _store_early(self, chunk: Index) -> None:
        try:
            stored = self._flush_chunk(chunk, self.io.units_of(chunk))
            if stored:
                self.early.stored(chunk)
        except Exception as e:  # the data stays dirty: the next flush stores it or reports why not
            key = self.geometry().chunk_key(chunk)
            log.warning("storing %r ahead of a flush failed: %s", self.store.path(key), e)
        finally:
            self.early.ended(chunk)

    # -- one stored object -----------------------------------------------------------------------

    def _flush_chunk(self, chunk: Index, units: list[Index], deferred: bool = False) -> Written | None:
        """Store those of `units` still dirty once no other write-back of the chunk is
        running; what was stored (None: nothing), settled now unless `deferred`."""
        with self.early.chunk_locks(chunk):
            units = self.array_cache.dirty_among(units)
            if not units:
                return None
            whole = len(units) == len(self.io.units_of(chunk)) and self.array_cache.all_whole(units)
            with self.write_slots(whole):
                done = self._write_back(chunk, units)
            if not deferred:
                self._settle(done)
            return done

    def _settle(self, done: Written) -> None:
        self.rechecker.seen.note(done.chunk, done.generation)
        self.array_cache.settle(done.snapshot, done.generation)

    def _write_back(self, chunk: Index, units: list[Index]) -> Written:
        """Store one chunk or shard as a compare-and-swap on the stored object: if another
        writer replaced it since it was read, read it again, apply this mount's unsaved writes
        on top and try again."""
        key = self.geometry().chunk_key(chunk)
        for attempt in range(MAX_ATTEMPTS):
            if attempt:  # two writers that keep colliding must not stay in step
                time.sleep(random.uniform(0, min(0.001 * 2**attempt, 0.25)))
            stored = self.io.stored_for_write(key, chunk, len(units), self.array_cache.all_whole(units))
            with self._holding(stored, units):
                done = self._write_over(key, chunk, units, stored)
            if done is not None:
                return done
        raise ChunkError(key, f"another writer kept changing it ({MAX_ATTEMPTS} attempts)")

    @contextlib.contextmanager
    def _holding(self, stored: StoredShard | None, units: list[Index]) -> Iterator[None]:
        """Count what a write-back holds outside the cache's entries against the cache while
        it runs: the stored shard it rebuilds around (random writes of `data` into 32 MiB
        shards at cache=64M peaked at 173.5 MiB, past the cache + 100 MiB bound, with it left
        out); for a plain chunk partly written, the stored chunk read to merge it (a dozen
        write-backs at once took 20-30 MiB beside a full cache=256M). Not an encoding, nor a
        chunk that needs no merge: a write-back held up by a store that is down would make
        the cache drop the chunks it serves readers meanwhile
        (tests/reliability/test_s3_mount.py), for memory an encoding mostly never takes.
        The memory the cache lets go goes back to the system by the daemon's trimmer."""
        merged = bool(self.array_cache.incomplete(units)) if stored is None else False
        nbytes = stored.nbytes if stored is not None else self._chunk_bytes * merged
        if nbytes:
            self.array_cache.mount.hold(nbytes, give_back=stored is not None)
        try:
            yield
        finally:
            if nbytes:
                self.array_cache.mount.hold(-nbytes)

    def _write_over(self, key: str, chunk: Index, units: list[Index],
                    stored: StoredShard | None) -> Written | None:
        """One attempt of `_write_back` over what is stored now: None when another writer's
        change came first (merged in: to try again)."""
        if stored is None:
            self._merge_stored(self.array_cache.incomplete(units))
        elif stored.known:
            if self.rechecker.seen.snapshot([chunk]).get(chunk, stored.generation) != stored.generation:
                self.rechecker.forget({chunk})  # changed outside: cached inner chunks may be stale
            self._rebase(units, stored)
        snapshot = self.array_cache.take(units)
        expect = _expected(snapshot, stored)
        ready, held = self._encoded_ahead(snapshot)
        try:
            generation = self.io.put(key, chunk, snapshot.arrays, stored, expect, ready)
        except ConflictError:
            self.array_cache.give_back(snapshot)
            self.shared.counters.add(write_conflicts=1)
            log.info("chunk %r was changed by another writer; merging and retrying", self.store.path(key))
            if stored is None:
                self._merge_stored(units)
            return None
        except BaseException:
            self.array_cache.give_back(snapshot)
            raise
        finally:
            if held:
                self.array_cache.mount.hold(-held)
        return Written(chunk, snapshot, generation)

    def _rebase(self, units: list[Index], stored: StoredShard) -> None:
        """Merge with the shard about to be rewritten (one read, under one deadline: not
        through its index, whose load readers of the shard may be waiting on) its inner
        chunks partly written, and those read from an older version of it."""
        assert isinstance(self.io, ShardedChunkIO)
        cache = self.array_cache
        for unit in [*cache.incomplete(units), *cache.read_from_other(units, stored.generation)]:
            fetched = Fetched(self.io.decode_stored(stored, unit), stored.generation)
            self.array_cache.merge_stored(unit, self.source.as_read(unit, fetched))

    def _merge_stored(self, units: list[Index]) -> None:
        """Merge the plain chunks partly written with what is stored, read here, under one deadline:
        not by joining the loads readers started, which may be queued behind others on a
        silent store (a flush must fail within the timeout, not after every load before it)."""
        if units:
            for unit, fetched in zip(units, self.source.fetch(units, merging=True), strict=True):
                self.array_cache.merge_stored(unit, fetched)


@dataclass(frozen=True)
class Written:
    """A chunk (shard) stored: what was sent, and the generation it was stored as."""

    chunk: Index
    snapshot: WriteSnapshot
    generation: str | None


def _expected(snapshot: WriteSnapshot, stored: StoredShard | None) -> Expect:
    """The generation the put must find: the shard just read, or the one a plain chunk was
    read at. A chunk written whole without being read replaces whatever is there."""
    if stored is not None:
        return stored.generation if stored.known else ANY
    (entry,) = snapshot.entries.values()
    return entry.base if entry.loaded else ANY
