"""Moving one chunk between the store and memory: plain chunks whole, sharded arrays one
inner chunk at a time through the shard index (cached), shards rebuilt on write-back keeping
the encoded bytes of the inner chunks that did not change."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..codecs import BytesLike, CodecError, Pipeline, ShardIndex, ShardingCodec, is_fill
from ..errors import ChunkError
from ..grid import Index
from ..store import ByteRange, Store
from .cache import ChunkCache, Counters

log = logging.getLogger(__name__)


@dataclass
class Stats:
    """Counters for tests and benchmarks."""

    loads: int = 0
    bytes_fetched: int = 0
    chunks_written: int = 0
    chunks_deleted: int = 0


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

    def location(self, unit: Index) -> tuple[Index, Index | None]:
        return unit, None

    def fetch(self, key: str, chunk: Index, inner: Index | None) -> np.ndarray | None:
        data = self.store.get(key)
        if data is None:
            return None
        self.count_fetch(len(data))
        return self.timed_decode(self.pipeline.decode, data)

    def put(self, key: str, chunk: Index, arrays: dict[Index, np.ndarray]) -> None:
        (data,) = arrays.values()
        if is_fill(data, self.fill_value):
            self.store.delete(key)
            self.stats.chunks_deleted += 1
        else:
            encoded = self.timed_encode(self.pipeline.encode, data)
            self.store.put(key, encoded, sync_directory=False)
            self.counters.add(bytes_stored=len(encoded))
            self.stats.chunks_written += 1

    def count_fetch(self, nbytes: int) -> None:
        with self._lock:
            self.stats.loads += 1
            self.stats.bytes_fetched += nbytes
        self.counters.add(bytes_fetched=nbytes)

    def timed_decode(self, decode: Callable[[BytesLike], np.ndarray], data: BytesLike) -> np.ndarray:
        start = time.perf_counter()
        decoded = decode(data)
        self.counters.add(chunks_decoded=1, decode_seconds=time.perf_counter() - start)
        return decoded

    def timed_encode(self, encode: Callable[[np.ndarray], BytesLike], data: np.ndarray) -> BytesLike:
        start = time.perf_counter()
        encoded = encode(data)
        self.counters.add(chunks_encoded=1, encode_seconds=time.perf_counter() - start)
        return encoded


class ShardedChunkIO(PlainChunkIO):
    """Each stored object is a shard; the unit read and cached is the inner chunk."""

    def __init__(self, store: Store, pipeline: Pipeline, sharding: ShardingCodec, cache: ChunkCache,
                 owner: int, stats: Stats, counters: Counters) -> None:
        super().__init__(store, pipeline, sharding.chunk.fill_value, stats, counters)
        self.sharding = sharding
        self.cache = cache
        self.owner = owner
        # Striped locks: one index fetch per shard at a time, in constant memory.
        self._index_locks = [threading.Lock() for _ in range(64)]
        # A partial read that saw a shard rewrite start or end while it read retries.
        self._rewrites_running = 0
        self._rewrite_generation = 0

    def location(self, unit: Index) -> tuple[Index, Index | None]:
        per = self.sharding.chunks_per_shard
        return (tuple(u // p for u, p in zip(unit, per, strict=True)),
                tuple(u % p for u, p in zip(unit, per, strict=True)))

    def fetch(self, key: str, chunk: Index, inner: Index | None) -> np.ndarray | None:
        assert inner is not None
        while True:
            generation = self._rewrite_generation
            if self._rewrites_running:
                time.sleep(0.001)  # a write-back is replacing a shard
                continue
            index = self._shard_index(chunk, key)
            span = None if index is None else index.span(inner)
            if span is None:
                data = None
            else:
                data = self.store.get(key, ByteRange(span.offset, span.nbytes))
                if data is None or len(data) != span.nbytes:
                    raise CodecError(f"shard is truncated: inner chunk {inner} lies past its end")
                self.count_fetch(len(data))
            if self._rewrite_generation == generation and not self._rewrites_running:
                break  # no write-back replaced the shard while we read it
        return None if data is None else self.timed_decode(self.sharding.decode_inner, data)

    def _shard_index(self, chunk: Index, key: str) -> ShardIndex | None:
        with self._index_locks[hash(chunk) % len(self._index_locks)]:
            with self.cache.lock:
                cached = self.cache.indexes.get((self.owner, chunk), False)
                if cached is not False:
                    self.cache.indexes.move_to_end((self.owner, chunk))
                    return cached  # type: ignore[no-any-return]
            index = self._fetch_index(key)
            self.cache.remember_index((self.owner, chunk), index, index_cost)
            return index

    def _fetch_index(self, key: str) -> ShardIndex | None:
        """Read and check a shard's index: its size first, so entries can be bounded by it."""
        shard_nbytes = self.store.size(key)
        if shard_nbytes is None:
            return None
        if shard_nbytes < self.sharding.index_nbytes:
            raise CodecError(f"shard of {shard_nbytes} bytes is shorter than its index")
        span = self.sharding.index_span(shard_nbytes)
        raw = self.store.get(key, ByteRange(span.offset, span.nbytes))
        if raw is None:
            return None  # deleted between the two calls
        self.count_fetch(len(raw))
        return self.sharding.decode_index(raw, shard_nbytes)

    def put(self, key: str, chunk: Index, arrays: dict[Index, np.ndarray]) -> None:
        sharding = self.sharding
        # A shard whose every inner chunk is new need not be read first.
        whole = len(arrays) == math.prod(sharding.chunks_per_shard)
        encoded = {} if whole else self._stored_inner_chunks(key)
        shard_origin = tuple(c * p for c, p in zip(chunk, sharding.chunks_per_shard, strict=True))
        for unit, data in arrays.items():
            inner = tuple(u - o for u, o in zip(unit, shard_origin, strict=True))
            new = None if is_fill(data, self.fill_value) else self.timed_encode(sharding.inner.encode, data)
            if new is None:
                encoded.pop(inner, None)
            else:
                encoded[inner] = new
        with self.cache.lock:
            self._rewrites_running += 1
            self._rewrite_generation += 1
        try:
            self._replace_shard(key, chunk, encoded)
        except BaseException:
            self.cache.forget_index((self.owner, chunk), index_cost)
            raise
        finally:
            with self.cache.lock:
                self._rewrites_running -= 1
                self._rewrite_generation += 1

    def _replace_shard(self, key: str, chunk: Index, encoded: dict[Index, BytesLike]) -> None:
        index: ShardIndex | None = None
        if encoded:
            shard = self.sharding.assemble(encoded)
            self.store.put(key, shard, sync_directory=False)
            self.counters.add(bytes_stored=len(shard))
            span = self.sharding.index_span(len(shard))
            index = self.sharding.decode_index(shard[span.offset : span.end], len(shard))
            self.stats.chunks_written += 1
        else:
            self.store.delete(key)
            self.stats.chunks_deleted += 1
        self.cache.remember_index((self.owner, chunk), index, index_cost)

    def _stored_inner_chunks(self, key: str) -> dict[Index, BytesLike]:
        """The encoded bytes of every inner chunk a stored shard holds."""
        sharding = self.sharding
        shard = self.store.get(key)
        if shard is None:
            return {}
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


def index_cost(index: ShardIndex | None) -> int:
    return 64 + (0 if index is None else index.entries.nbytes)


def partial_read_sharding(pipeline: Pipeline) -> ShardingCodec | None:
    """The sharding codec when its inner chunks can be read one by one."""
    codec = pipeline.array_to_bytes
    if isinstance(codec, ShardingCodec) and not pipeline.array_codecs and not pipeline.bytes_codecs:
        return codec
    return None
