"""Moving one chunk between the store and memory: plain chunks whole, sharded arrays one
inner chunk at a time through the shard index (cached), shards rebuilt on write-back keeping
the encoded bytes of the inner chunks that did not change.

Every fetch reports the generation of the stored object it read, and every put is a
compare-and-swap against a generation (`zarrfs.store`): the write-back above merges again and
retries when another writer got there first."""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field

import numpy as np

from ..codecs import BytesLike, CodecError, Pipeline, ShardIndex, ShardingCodec, is_fill
from ..errors import ChunkError, StoreError
from ..grid import Index
from ..store import ByteRange, Expect, Store, Versioned
from .cache import ChunkCache, Counters
from .shard_reads import MAX_SHARD_RETRIES, ShardReader

log = logging.getLogger(__name__)
FAST_ENCODE_BYTES_PER_SECOND = 1 << 30  # a thread encoding this fast keeps up with requests
CHEAP_DECODE_SECONDS = 30e-6  # less than reading a chunk around its decoder costs (streaming)
MEASURED_DECODES = 16  # before an array's chunks are known to decode slowly


@dataclass
class Stats:
    """Counters for tests and benchmarks."""

    loads: int = 0
    bytes_fetched: int = 0
    chunks_written: int = 0
    chunks_deleted: int = 0


@dataclass
class Fetched:
    """A read chunk as decoded (None: not stored, all fill) and the generation of the stored
    object it came from."""

    data: np.ndarray | None
    generation: str | None


@dataclass
class StoredShard:
    """A shard as stored when a write-back starts: its generation and encoded inner chunks."""

    generation: str | None
    inner: dict[Index, BytesLike] = field(default_factory=dict)
    known: bool = True  # False: not read (every inner chunk is replaced)


class PlainChunkIO:
    """Each stored object is one chunk, decoded and encoded whole."""

    def __init__(self, store: Store, pipeline: Pipeline, fill_value: bytes, stats: Stats,
                 counters: Counters) -> None:
        self.store = store
        self.pipeline = pipeline
        self.fill_value = fill_value
        self.stats = stats
        self.counters = counters
        self._lock = threading.Lock()
        self._encoding = (0, 0.0)  # bytes encoded, and the seconds it took
        self._decoding = (0, 0.0)  # chunks decoded, and the CPU seconds it took
        self._parked: dict[str, Versioned | None] = {}  # fetched together, until `fetch` takes them

    def location(self, unit: Index) -> tuple[Index, Index | None]:
        return unit, None

    def units_of(self, chunk: Index) -> list[Index]:
        """The read chunks a stored object holds."""
        return [chunk]

    def fetch(self, key: str, chunk: Index, inner: Index | None) -> Fetched:
        with self._lock:
            parked = key in self._parked
            found = self._parked.pop(key, None)
        if not parked:
            found = self.store.read(key)
        if found is None:
            return Fetched(None, None)
        self.count_fetch(len(found.data))
        return Fetched(self.timed_decode(self.pipeline.decode, found.data), found.generation)

    def fetch_run(self, key: str, chunk: Index, inners: Sequence[Index | None]) -> Iterator[Fetched]:
        """Read chunks of one stored object (a plain chunk is one), decoded one at a time."""
        return (self.fetch(key, chunk, inner) for inner in inners)

    def forget_index(self, chunk: Index) -> None:
        """Plain chunks have no index."""

    def read_ahead(self, key: str, chunk: Index) -> None:
        """A sequential reader is heading into this stored object (plain chunks: read as
        needed, each with one request)."""

    def read_early(self, key: str, chunk: Index) -> None:
        """A sequential reader will reach this stored object after the ones it reads now
        (plain chunks: read as needed)."""

    def read_together(self, keys: Sequence[str]) -> None:
        """A stream's job is about to read these chunks one after another: on S3, fetch them
        first all at once (one wait on the event loop for the lot, not one each; a fault is
        left to `fetch`, which reports it), held until `fetch` takes them or `let_go`."""
        if not self.store.is_s3 or len(keys) <= 1:
            return
        with contextlib.suppress(StoreError):
            found = self.store.read_many(keys)
            with self._lock:
                self._parked.update(zip(keys, found, strict=True))

    def let_go(self, keys: Sequence[str]) -> None:
        """Forget what `read_together` fetched of `keys` and `fetch` did not take."""
        with self._lock:
            for key in keys:
                self._parked.pop(key, None)

    def stored_for_write(self, key: str, units: int, whole: bool) -> StoredShard | None:
        """What a write-back must build on: nothing for plain chunks (each is written whole)."""
        return None

    def put(self, key: str, chunk: Index, arrays: dict[Index, np.ndarray], stored: StoredShard | None,
            expect: Expect, ready: Mapping[Index, BytesLike | None] | None = None) -> str | None:
        """Store a chunk if the stored object is still `expect`; its new generation. (`ready`:
        see ShardedChunkIO.put; plain chunks are not encoded ahead.)"""
        (data,) = arrays.values()
        if is_fill(data, self.fill_value):
            self.store.delete(key, expect=expect)
            self.count_stored(deleted=True)
            return None
        encoded = self.timed_encode(self.pipeline.encode, data)
        generation = self.store.put(key, encoded, sync_directory=False, expect=expect)
        self.counters.add(bytes_stored=len(encoded))
        self.count_stored(deleted=False)
        return generation

    def count_stored(self, *, deleted: bool) -> None:
        """A stored object written or deleted (writer threads: under the lock)."""
        with self._lock:
            if deleted:
                self.stats.chunks_deleted += 1
            else:
                self.stats.chunks_written += 1

    def count_fetch(self, nbytes: int) -> None:
        with self._lock:
            self.stats.loads += 1
            self.stats.bytes_fetched += nbytes
        self.counters.add(bytes_fetched=nbytes)

    def timed_decode(self, decode: Callable[[BytesLike], np.ndarray], data: BytesLike) -> np.ndarray:
        start, cpu_start = time.perf_counter(), time.thread_time()  # (CPU: not the lock's wait)
        decoded = decode(data)
        count, cpu = self._decoding  # (unlocked: threads may drop a count; it is an estimate)
        self._decoding = (count + 1, cpu + time.thread_time() - cpu_start)
        self.counters.add(chunks_decoded=1, decode_seconds=time.perf_counter() - start)
        return decoded

    def timed_encode(self, encode: Callable[[np.ndarray], BytesLike], data: np.ndarray) -> BytesLike:
        start = time.perf_counter()
        encoded = encode(data)
        seconds = time.perf_counter() - start
        self.counters.add(chunks_encoded=1, encode_seconds=seconds)
        self.note_encoding(data.nbytes, seconds)
        return encoded

    def note_encoding(self, nbytes: int, seconds: float) -> None:
        """`nbytes` were encoded in `seconds` (what `encodes_slowly` measures)."""
        with self._lock:
            self._encoding = (self._encoding[0] + nbytes, self._encoding[1] + seconds)

    @property
    def decodes_cheaply(self) -> bool:
        """Whether the chunks decoded so far took little CPU (yes until MEASURED_DECODES were)."""
        count, seconds = self._decoding
        return count < MEASURED_DECODES or seconds < CHEAP_DECODE_SECONDS * count

    @property
    def encodes_slowly(self) -> bool:
        """Whether encoding this array's chunks costs more than a write request for their
        bytes does (~1 ms per MiB), or nothing was encoded yet."""
        nbytes, seconds = self._encoding
        return nbytes < FAST_ENCODE_BYTES_PER_SECOND * seconds or not nbytes


class ShardedChunkIO(PlainChunkIO):
    """Each stored object is a shard; the unit read and cached is the inner chunk (read
    through a ShardReader: zarrfs.array.shard_reads)."""

    def __init__(self, store: Store, pipeline: Pipeline, sharding: ShardingCodec, cache: ChunkCache,
                 owner: int, stats: Stats, counters: Counters, encoders: Executor) -> None:
        super().__init__(store, pipeline, sharding.chunk.fill_value, stats, counters)
        self.encoders = encoders
        self.sharding = sharding
        self.cache = cache
        self.owner = owner
        self.reader = ShardReader(store, sharding, cache, owner, self.count_fetch)
        self._shard_lock = self.reader.lock

    def location(self, unit: Index) -> tuple[Index, Index | None]:
        per = self.sharding.chunks_per_shard
        return (tuple(u // p for u, p in zip(unit, per, strict=True)),
                tuple(u % p for u, p in zip(unit, per, strict=True)))

    def units_of(self, chunk: Index) -> list[Index]:
        per = self.sharding.chunks_per_shard
        return [tuple(c * p + i for c, p, i in zip(chunk, per, inner, strict=True))
                for inner in self.sharding.inner_positions()]

    def forget_index(self, chunk: Index) -> None:
        self.reader.forget(chunk)

    def read_ahead(self, key: str, chunk: Index) -> None:
        self.reader.read_ahead(key, chunk)

    def read_early(self, key: str, chunk: Index) -> None:
        self.reader.read_early(key, chunk, self.encoders.submit)

    def fetch(self, key: str, chunk: Index, inner: Index | None) -> Fetched:
        assert inner is not None
        for _ in range(MAX_SHARD_RETRIES):
            found = None
            with self._shard_lock(chunk):
                if self.reader.wants_whole(1):
                    self.reader.fetch_whole(key, chunk)
                index, generation = self.reader.index(chunk, key)
                span = None if index is None else index.span(inner)
                if span is None:
                    return Fetched(None, generation)
                if generation is None:  # no generations: read before a rewrite can begin
                    found = self.store.read(key, ByteRange(span.offset, span.nbytes))
            if generation is not None:
                encoded = self.reader.read_inner(key, chunk, {inner: span}, generation)
                if encoded is None:
                    self.reader.forget(chunk)  # rewritten meanwhile
                    continue
                return Fetched(self.timed_decode(self.sharding.decode_inner, encoded[inner]), generation)
            if found is None or len(found.data) != span.nbytes:
                raise CodecError(f"shard is truncated: inner chunk {inner} lies past its end")
            self.count_fetch(len(found.data))
            return Fetched(self.timed_decode(self.sharding.decode_inner, found.data), generation)
        raise CodecError(f"shard kept changing while inner chunk {inner} was read")

    def fetch_run(self, key: str, chunk: Index, inners: Sequence[Index | None]) -> Iterator[Fetched]:
        """Inner chunks of one shard, read with as few requests as the store wants (see
        ShardReader.read_inner; on a remote store the whole shard when the read needs most
        of it); decoded one at a time as taken."""
        for _ in range(MAX_SHARD_RETRIES):
            with self._shard_lock(chunk):
                if self.reader.wants_whole(len(inners)):
                    self.reader.fetch_whole(key, chunk)
                index, generation = self.reader.index(chunk, key)
            if index is None or generation is None or len(inners) == 1:
                # (no generations: each read under the lock, before a rewrite can begin)
                yield from super().fetch_run(key, chunk, inners)
                return
            spans = {inner: index.span(inner) for inner in inners if inner is not None}
            encoded = self.reader.read_inner(key, chunk, spans, generation)
            if encoded is not None:
                for inner in inners:
                    found = None if inner is None else encoded.get(inner)
                    decoded = None if found is None else self.timed_decode(self.sharding.decode_inner, found)
                    yield Fetched(decoded, generation)
                return
            self.reader.forget(chunk)  # rewritten meanwhile
        raise CodecError(f"shard kept changing while inner chunks {list(inners)} were read")

    def stored_for_write(self, key: str, units: int, whole: bool) -> StoredShard | None:
        """The stored shard a write-back keeps the other inner chunks of. Not read when every
        inner chunk is new (then it is replaced whatever it holds)."""
        if whole and units == math.prod(self.sharding.chunks_per_shard):
            return StoredShard(None, known=False)
        found = self.store.read(key)
        if found is None:
            return StoredShard(None)
        self.count_fetch(len(found.data))
        return StoredShard(found.generation, self._inner_chunks(key, found.data))

    def decode_stored(self, stored: StoredShard, unit: Index) -> np.ndarray | None:
        inner = self.location(unit)[1]
        assert inner is not None
        encoded = stored.inner.get(inner)
        return None if encoded is None else self.timed_decode(self.sharding.decode_inner, encoded)

    def put(self, key: str, chunk: Index, arrays: dict[Index, np.ndarray], stored: StoredShard | None,
            expect: Expect, ready: Mapping[Index, BytesLike | None] | None = None) -> str | None:
        """As PlainChunkIO.put; `ready` holds inner chunks already encoded (None: all fill)."""
        assert stored is not None
        encoded = dict(stored.inner)
        changed: dict[Index, np.ndarray] = {}
        for unit, data in arrays.items():
            inner = self.location(unit)[1]
            assert inner is not None
            if ready and unit in ready:
                done = ready[unit]
                if done is None:
                    encoded.pop(inner, None)
                else:
                    encoded[inner] = done
            elif is_fill(data, self.fill_value):
                encoded.pop(inner, None)
            else:
                changed[inner] = data
        # The new pieces count against the cache until stored: a whole shard's worth of them
        # (their decoded size, which they rarely exceed) on top of a full cache went past its
        # bound. Encoded on the loader threads, on every core (this runs on a writer thread;
        # loaders never wait for writers).
        held = sum(data.nbytes for data in changed.values())
        self.cache.hold(held)
        try:
            encoded.update(zip(changed, self.encoders.map(self.encode_inner, changed.values()), strict=True))
            with self._shard_lock(chunk):
                return self._replace_shard(key, chunk, encoded, expect)
        except BaseException:
            self.reader.forget(chunk)
            raise
        finally:
            self.cache.hold(-held)

    def encode_inner(self, data: np.ndarray) -> BytesLike:
        return self.timed_encode(self.sharding.inner.encode, data)

    def encode_ahead(self, data: np.ndarray) -> BytesLike | None:
        """An inner chunk's encoding ahead of its shard's write-back (None: all fill)."""
        return None if is_fill(data, self.fill_value) else self.encode_inner(data)

    def _replace_shard(self, key: str, chunk: Index, encoded: dict[Index, BytesLike],
                       expect: Expect) -> str | None:
        index: ShardIndex | None = None
        generation = None
        if encoded:
            # Written from its pieces: the shard is never held twice (pieces and joined).
            parts = self.sharding.shard_parts(encoded)
            nbytes = sum(len(part) for part in parts)
            generation = self.store.put(key, parts, sync_directory=False, expect=expect)
            self.counters.add(bytes_stored=nbytes)
            index_part = parts[0] if self.sharding.index_at_start else parts[-1]
            index = self.sharding.decode_index(bytes(index_part), nbytes)
            self.count_stored(deleted=False)
        else:
            self.store.delete(key, expect=expect)
            self.count_stored(deleted=True)
        self.reader.remember(chunk, index, generation)
        return generation

    def _inner_chunks(self, key: str, shard: BytesLike) -> dict[Index, BytesLike]:
        """The encoded bytes of every inner chunk a stored shard holds."""
        sharding = self.sharding
        try:
            if len(shard) < sharding.index_nbytes:
                raise CodecError("shard is shorter than its index")
            span = sharding.index_span(len(shard))
            index = sharding.decode_index(shard[span.offset : span.end], len(shard))
        except CodecError as e:
            raise ChunkError(key, str(e)) from None
        view = memoryview(shard)
        found: dict[Index, BytesLike] = {}
        for inner in sharding.inner_positions():
            where = index.span(inner)
            if where is not None:
                found[inner] = view[where.offset : where.end]
        return found


def partial_read_sharding(pipeline: Pipeline) -> ShardingCodec | None:
    """The sharding codec when its inner chunks can be read one by one."""
    codec = pipeline.array_to_bytes
    if isinstance(codec, ShardingCodec) and not pipeline.array_codecs and not pipeline.bytes_codecs:
        return codec
    return None
