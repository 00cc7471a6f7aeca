"""Moving the inner chunks of a sharded array between the store and memory: read one at a
time through the shard index (cached; `shard_reads` decides how many requests), and shards
rebuilt on write-back keeping the encoded bytes of the inner chunks that did not change (see
`chunk_io` for what every chunk I/O shares)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor

import numpy as np

from ...codecs import BytesLike, CodecError, Pipeline, ShardIndex, ShardingCodec
from ...errors import ChunkError
from ...grid import Index
from ...store import ByteRange, Described, Expect, Store
from ..cache import ChunkCache, Counters
from .chunk_io import Encoded, PlainChunkIO, Stats, StoredChunk, StoredShard
from .shard_reads import MAX_SHARD_RETRIES, ShardReader


class ShardedChunkIO(PlainChunkIO):
    """Each stored object is a shard; the unit read and cached is the inner chunk (read
    through a ShardReader: zarrfs.array.stored.shard_reads)."""

    def __init__(self, store: Store, pipeline: Pipeline, sharding: ShardingCodec, cache: ChunkCache,
                 owner: int, stats: Stats, counters: Counters, encoders: Executor, *,
                 keep_fill: bool = False) -> None:
        super().__init__(store, pipeline, sharding.chunk.fill_value, stats, counters, keep_fill=keep_fill)
        self.encoders = encoders
        self.sharding = sharding  # (of a rectilinear grid: built for its largest edges)
        self.cache = cache
        self.owner = owner
        self.reader = ShardReader(store, sharding, cache, owner, self.count_fetch, self.sharding_of)
        self._shard_lock = self.reader.lock
        self.decoder = sharding.decode_inner

    def sharding_of(self, chunk: Index) -> ShardingCodec:
        """The codec of the shard `chunk` (every shard of a regular grid has the same shape)."""
        return self.sharding

    def location(self, unit: Index) -> tuple[Index, Index | None]:
        per = self.sharding.chunks_per_shard
        return (tuple(u // p for u, p in zip(unit, per, strict=True)),
                tuple(u % p for u, p in zip(unit, per, strict=True)))

    def units_of(self, chunk: Index) -> list[Index]:
        """The read chunks of shard `chunk`, in C order (the order of `inner_positions`)."""
        per = self.sharding.chunks_per_shard
        return list(itertools.product(*(range(c * p, c * p + p) for c, p in zip(chunk, per, strict=True))))

    def locate(self, keys: Mapping[Index, str], *, by_rows: bool = False) -> dict[Index, StoredChunk]:
        """As PlainChunkIO.locate, from the shards' indexes: one listing of the shards, then
        the index of each shard stored, read again only when the listing shows that the
        shard changed since it was read (all at once on a remote store)."""
        listed = self.list_stored(keys.values(), by_rows=by_rows)
        shards = [(chunk, key, listed[key]) for chunk, key in keys.items()]
        found = self.encoders.map(self._locate_shard, shards) if self.reader.remote else map(
            self._locate_shard, shards)
        return {unit: where for located in found for unit, where in located.items()}

    def _locate_shard(self, shard: tuple[Index, str, Described]) -> dict[Index, StoredChunk]:
        chunk, key, described = shard
        try:
            with self._shard_lock(chunk):
                index, generation = self.reader.index_as_listed(chunk, key, described)
        except CodecError as e:  # (a bad index: the log names the shard)
            raise ChunkError(key, str(e)) from None
        if index is None:
            return {}
        # (the index read out at once: entry by entry, locating a shard of 64 took twice as long)
        units = zip(self.units_of(chunk), index.spans_in_order(), strict=True)
        return {unit: StoredChunk(key, *span, generation) for unit, span in units if span is not None}

    def read_unit_now(self, key: str, where: tuple[Index, Index | None], into: memoryview) -> Described:
        """As PlainChunkIO.read_unit_now, for an inner chunk (`key`: its shard's), where its
        shard's index says (`ShardReader.index_now`); the generation is the shard's."""
        shard, inner = where
        found = self.reader.index_now(shard, key)
        if found is None or inner is None:
            return None
        index, generation = found
        span = index.span(inner)
        if span is None:
            return -1, generation
        files = self.store.local_files
        if files is None or span.nbytes > len(into) or files.read_cached(
                key, span.offset, into[: span.nbytes]) != generation:
            return None
        self.count_fetch(span.nbytes)
        return span.nbytes, generation

    def forget_index(self, chunk: Index) -> None:
        self.reader.forget(chunk)

    def forget_stored(self) -> None:
        self.reader.forget_all()

    def read_ahead(self, key: str, chunk: Index) -> None:
        self.reader.read_ahead(key, chunk)

    def read_early(self, key: str, chunk: Index) -> None:
        self.reader.read_early(key, chunk, self.encoders.submit)

    def decode_chunk(self, chunk: Index, data: BytesLike) -> np.ndarray:
        return self.timed_decode(self.sharding.decode_inner, data)

    def fetch_encoded(self, key: str, chunk: Index, inner: Index | None, *,
                      open_file: bool = False) -> Encoded:
        """An inner chunk's bytes (`open_file` is not for them: ranges of a shard)."""
        assert inner is not None
        for _ in range(MAX_SHARD_RETRIES):
            index, generation = self.reader.load(chunk, key, whole=self.reader.wants_whole(1))
            if generation is None and index is not None:
                return self._unversioned(key, chunk, inner)
            span = None if index is None else index.span(inner)
            if span is None or generation is None:
                return Encoded(None, generation)
            encoded = self.reader.read_inner(key, chunk, {inner: span}, generation)
            if encoded is None:
                self.reader.forget(chunk)  # rewritten meanwhile
                continue
            return Encoded(encoded[inner], generation)
        raise CodecError(f"shard kept changing while inner chunk {inner} was read")

    def _unversioned(self, key: str, chunk: Index, inner: Index) -> Encoded:
        """An inner chunk of a store that reports no generations: its index and its bytes
        read under the shard's lock, before a rewrite can begin."""
        with self._shard_lock(chunk):
            index, generation = self.reader.index(chunk, key)
            span = None if index is None else index.span(inner)
            if span is None:
                return Encoded(None, generation)
            found = self.store.read(key, ByteRange(span.offset, span.nbytes))
        if found is None or len(found.data) != span.nbytes:
            raise CodecError(f"shard is truncated: inner chunk {inner} lies past its end")
        self.count_fetch(len(found.data))
        return Encoded(found.data, generation)

    def inner_spans(self, key: str, chunk: Index,
                    inners: Sequence[Index]) -> tuple[str | None, list[tuple[int, int] | None]] | None:
        """Where inner chunks lie in their shard as its index says now ((offset, nbytes); None:
        not stored), and the generation the index was read at (None, every span None: no shard
        stored); None where the store reports no generations (nobody could tell a rewrite).
        CodecError: a bad index."""
        index, generation = self.reader.load(chunk, key, whole=self.reader.wants_whole(len(inners)))
        if index is None:
            return None if generation is not None else (None, [None] * len(inners))
        if generation is None:
            return None
        return generation, [None if (span := index.span(inner)) is None else (span.offset, span.nbytes)
                            for inner in inners]

    def fetch_encoded_run(self, key: str, chunk: Index, inners: Sequence[Index | None], *,
                          open_files: bool = False) -> Iterator[Encoded]:
        """Inner chunks of one shard, read with as few requests as the store wants (see
        ShardReader.read_inner; on a remote store the whole shard when the read needs most
        of it)."""
        for _ in range(MAX_SHARD_RETRIES):
            index, generation = self.reader.load(chunk, key, whole=self.reader.wants_whole(len(inners)))
            if index is None or generation is None:
                # (no generations: each read under the lock, before a rewrite can begin)
                yield from super().fetch_encoded_run(key, chunk, inners)
                return
            spans = {inner: index.span(inner) for inner in inners if inner is not None}
            encoded = self.reader.read_inner(key, chunk, spans, generation)
            if encoded is not None:
                yield from (Encoded(encoded.get(inner) if inner is not None else None, generation)
                            for inner in inners)
                return
            self.reader.forget(chunk)  # rewritten meanwhile
        raise CodecError(f"shard kept changing while inner chunks {list(inners)} were read")

    def stored_for_write(self, key: str, chunk: Index, units: int, whole: bool) -> StoredShard | None:
        """The stored shard a write-back keeps the other inner chunks of. Not read when every
        inner chunk is new (then it is replaced whatever it holds)."""
        if whole and units == math.prod(self.sharding_of(chunk).chunks_per_shard):
            return StoredShard(None, known=False)
        found = self.store.read(key)
        if found is None:
            return StoredShard(None)
        self.count_fetch(len(found.data))
        inner = self._inner_chunks(key, chunk, found.data)
        return StoredShard(found.generation, inner, nbytes=len(found.data))

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
            elif self.omits(data):
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
        return None if self.omits(data) else self.encode_inner(data)

    def _replace_shard(self, key: str, chunk: Index, encoded: dict[Index, BytesLike],
                       expect: Expect) -> str | None:
        index: ShardIndex | None = None
        generation = None
        self.stats.stores += 1
        if encoded:
            # Written from its pieces: the shard is never held twice (pieces and joined).
            sharding = self.sharding_of(chunk)
            parts = sharding.shard_parts(encoded)
            nbytes = sum(len(part) for part in parts)
            generation = self.store.put(key, parts, sync_directory=False, expect=expect)
            self.counters.add(bytes_stored=nbytes)
            index_part = parts[0] if sharding.index_at_start else parts[-1]
            index = sharding.decode_index(bytes(index_part), nbytes)
        else:
            self.store.delete(key, expect=expect)
        self.reader.remember(chunk, index, generation)
        return generation

    def _inner_chunks(self, key: str, chunk: Index, shard: BytesLike) -> dict[Index, BytesLike]:
        """The encoded bytes of every inner chunk a stored shard holds."""
        sharding = self.sharding_of(chunk)
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
