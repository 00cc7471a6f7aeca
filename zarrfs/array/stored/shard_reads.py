"""Reading a shard's index and inner chunks from the store with as few requests as the store
wants: its index once (cached), and the inner chunks a read needs with one request per
stretch of the shard — lying next to each other locally; on a remote store, where a request
costs a round trip whatever its size, stretches whose gaps are small are merged
(zarrfs.store.ranges) and all of them are in flight at once.

On a remote store a shard a sequential reader is heading into, most of which one read needs,
or that is small, is fetched whole with one GET: the index comes from the same bytes (no request of its
own), and the encoded shard is held until its inner chunks were taken (at most half of the
cache, counted in it), so the rows of inner chunks a reader reaches next cost nothing. The
shards such a reader reaches after the ones it reads now are fetched early, in the background,
while the held ones leave room for them: their transfer overlaps the decoding of the current
row of shards instead of following it (as a reader that asks for every shard at once has them
all in flight)."""

from __future__ import annotations

import contextlib
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from ...codecs import BytesLike, ByteSpan, CodecError, ShardIndex, ShardingCodec
from ...errors import StoreError, StoreTimeout
from ...grid import Index
from ...store import ByteRange, Store
from ...store.ranges import REMOTE_GAP, merge, worth_whole
from ..cache import ChunkCache, KeyedLocks

MAX_SHARD_RETRIES = 20
RUN_BYTES = 16 << 20  # the most one request reads for inner chunks lying next to each other
WHOLE_SHARD_BYTES = 64 << 20  # shards (decoded) up to this may be fetched whole, remotely
WHOLE_FRACTION = 0.5  # of a shard's inner chunks one read needs: then it is fetched whole
SMALL_SHARD_BYTES = 4 << 20  # shards (decoded) up to this are fetched whole at first touch
# Of the cache, what held shards may take: room for two rows of shards, the one being read and
# the one fetched early (a quarter of cache=256M held one row of 8 MiB shards and a little).
HELD_FRACTION = 0.5
CachedIndex = tuple[ShardIndex | None, str | None]


@dataclass
class HeldShard:
    """An encoded shard fetched whole, with the inner chunks not yet taken from it."""

    data: BytesLike
    generation: str | None
    left: set[Index] = field(default_factory=set)


class ShardReader:
    """Reads of one array's shards (its ShardedChunkIO's)."""

    def __init__(self, store: Store, sharding: ShardingCodec, cache: ChunkCache, owner: int,
                 count_fetch: Callable[[int], None],
                 sharding_of: Callable[[Index], ShardingCodec] | None = None) -> None:
        """`sharding_of`: the codec of a shard, when shards differ in shape (a rectilinear
        grid; `sharding` is then built for the largest, for estimates of sizes)."""
        self.store = store
        self.sharding = sharding
        self.sharding_of = sharding_of or (lambda chunk: sharding)
        self.cache = cache
        self.owner = owner
        self.count_fetch = count_fetch
        # One index fetch per shard at a time. Where the store reports no generations, the
        # locks also keep a read from straddling a rewrite.
        self.lock = KeyedLocks()
        self._loads: dict[Index, Future[CachedIndex]] = {}  # shard -> its index being loaded
        self._loads_lock = threading.Lock()
        self.remote = store.capabilities.round_trips
        self._held: OrderedDict[Index, HeldShard] = OrderedDict()
        self._held_lock = threading.Lock()
        self._held_bytes = 0
        self._early: dict[Index, int] = {}  # shards being fetched early -> the bytes expected
        self._last_whole = sharding.chunk.nbytes  # the size of the last shard fetched whole

    # -- the index ---------------------------------------------------------------------------

    def index(self, chunk: Index, key: str, on_disk: tuple[int, str] | None = None) -> CachedIndex:
        """The shard's index and generation, cached (the shard's lock is held). `on_disk`:
        the shard's size and generation in the disk cache (`on_disk`), sparing a request."""
        cached = self.cached_index(chunk)
        if cached is not None:
            return cached
        found = self._fetch_index(key, self.sharding_of(chunk), on_disk)
        self.cache.remember_index((self.owner, chunk), found, index_cost)
        return found

    def load(self, chunk: Index, key: str, *, whole: bool, join_again: bool = True) -> CachedIndex:
        """The shard's index and generation, cached, else loaded (`whole`: with the whole
        shard, see fetch_whole) once for every reader asking meanwhile: they wait for that
        load, not for the shard's lock in turn, so on a silent store its failure (a timeout)
        fails them all within one deadline, not one deadline each. A load that failed at once
        may have begun before the store came back: a reader that joined it loads once more.
        (Not with the shard's lock held.)"""
        cached = self.cached_index(chunk)
        if cached is not None:
            return cached
        load: Future[CachedIndex] = Future()
        with self._loads_lock:
            running = self._loads.setdefault(chunk, load)
        if running is not load:
            try:
                return running.result()
            except StoreTimeout:
                raise
            except StoreError:
                if not join_again:
                    raise
                return self.load(chunk, key, whole=whole, join_again=False)
        try:
            with self.lock(chunk):
                on_disk = self.on_disk(key)
                if whole and on_disk is None:
                    self.fetch_whole(key, chunk)
                found = self.index(chunk, key, on_disk)
        except BaseException as e:
            load.set_exception(e)
            raise
        else:
            load.set_result(found)
            return found
        finally:
            with self._loads_lock:
                del self._loads[chunk]

    def index_as_listed(self, chunk: Index, key: str, listed: tuple[int, str | None] | None) -> CachedIndex:
        """The shard's index and generation as a listing found the shard (`listed`: its size
        and generation; None: not stored): the cached index while it is of that generation,
        else read again (the shard's lock is held). A shard not stored is forgotten, not
        remembered as missing (another writer may store it before the next listing)."""
        cached = self.cached_index(chunk)
        if cached is not None and listed is not None and cached[1] is not None and cached[1] == listed[1]:
            return cached
        if cached is not None:
            self.forget(chunk)
        if listed is None:
            return None, None
        # (the size listed spares a request, where reads tell whether it is still that shard)
        trusted = listed if self.store.capabilities.versioned else None
        found = self._fetch_index(key, self.sharding_of(chunk), trusted)
        self.cache.remember_index((self.owner, chunk), found, index_cost)
        return found

    def index_now(self, chunk: Index, key: str) -> tuple[ShardIndex, str] | None:
        """The shard's index and generation if they need no wait: cached (the reads through it
        check the generation), else read from a local store's page cache (and cached). None
        when they would wait, the shard is not known to be stored, or its index is bad (the
        reads that wait say why)."""
        cached = self.cached_index(chunk)
        if cached is not None:
            index, generation = cached
            return None if index is None or generation is None else (index, generation)
        sharding = self.sharding_of(chunk)
        raw = bytearray(sharding.index_nbytes)
        files = self.store.local_files
        if files is None:
            return None
        found = files.read_edge_cached(key, memoryview(raw), at_end=not sharding.index_at_start)
        if found is None:
            return None
        try:
            index = sharding.decode_index(raw, found[0])
        except CodecError:
            return None
        self.count_fetch(len(raw))
        self.cache.remember_index((self.owner, chunk), (index, found[1]), index_cost)
        return index, found[1]

    def cached_index(self, chunk: Index) -> CachedIndex | None:
        cached: CachedIndex | None = self.cache.index_of((self.owner, chunk))
        return cached

    def forget(self, chunk: Index) -> None:
        """Forget what is known of a shard (its index, its held bytes): it was rewritten."""
        self.cache.forget_index((self.owner, chunk), index_cost)
        self._drop_held(chunk)

    def forget_all(self) -> None:
        """Forget every shard's index and held bytes (the array changed shape)."""
        self.cache.forget_indexes(self.owner, index_cost)
        with self._held_lock:
            held, self._held, self._held_bytes = self._held, OrderedDict(), 0
        self.cache.hold(-sum(len(shard.data) for shard in held.values()))

    def remember(self, chunk: Index, index: ShardIndex | None, generation: str | None) -> None:
        """A shard this mount just stored (or deleted): its index, and no held bytes."""
        self._drop_held(chunk)
        self.cache.remember_index((self.owner, chunk), (index, generation), index_cost)

    def _fetch_index(self, key: str, sharding: ShardingCodec,
                     listed: tuple[int, str | None] | None = None) -> CachedIndex:
        """Read and check a shard's index: its size first (`listed`, or asked for), so
        entries can be bounded by it."""
        for _ in range(MAX_SHARD_RETRIES):
            described, listed = listed or self.store.stat(key), None
            if described is None:
                return None, None
            shard_nbytes, generation = described
            if shard_nbytes < sharding.index_nbytes:
                raise CodecError(f"shard of {shard_nbytes} bytes is shorter than its index")
            span = sharding.index_span(shard_nbytes)
            found = self.store.read(key, ByteRange(span.offset, span.nbytes))
            if found is None:
                return None, None  # deleted meanwhile
            if found.generation is not None and found.generation != generation:
                continue  # replaced between the two calls
            self.count_fetch(len(found.data))
            return sharding.decode_index(found.data, shard_nbytes), found.generation
        raise CodecError("shard kept changing while its index was read")

    def on_disk(self, key: str) -> tuple[int, str] | None:
        """The size and generation of a remote shard the disk cache holds whole: then it is
        read as a local one is (its index, then the inner chunks a read needs), not whole."""
        cached = self.store.cached_on_disk
        return None if cached is None or not self.remote else cached.whole(key)

    # -- whole shards ------------------------------------------------------------------------

    def wants_whole(self, inner_count: int) -> bool:
        """Whether a read of `inner_count` inner chunks of a shard whose index is not known
        yet should fetch it whole, on a remote store: one request instead of three (a HEAD,
        the index, the chunks), when the read needs most of it or the shard is small (its
        transfer costs about what the two requests saved do)."""
        if not self.remote or not self._small_enough():
            return False
        total = math.prod(self.sharding.chunks_per_shard)
        return inner_count >= WHOLE_FRACTION * total or self.sharding.chunk.nbytes <= SMALL_SHARD_BYTES

    def fetch_whole(self, key: str, chunk: Index) -> None:
        """Fetch a shard whole (one GET) and hold it, when its index is not known yet (the
        shard's lock is held). Its index is cached from the same bytes."""
        if self.cached_index(chunk) is not None:
            return
        found = self.store.read(key)
        if found is None:
            self.cache.remember_index((self.owner, chunk), (None, None), index_cost)
            return
        shard = found.data
        sharding = self.sharding_of(chunk)
        if len(shard) < sharding.index_nbytes:
            raise CodecError(f"shard of {len(shard)} bytes is shorter than its index")
        span = sharding.index_span(len(shard))
        index = sharding.decode_index(shard[span.offset : span.end], len(shard))
        self.count_fetch(len(shard))
        self._last_whole = len(shard)
        stored = {inner for inner in sharding.inner_positions() if index.span(inner) is not None}
        if stored and len(shard) <= self._held_budget():
            self._hold(chunk, HeldShard(shard, found.generation, stored))
        self.cache.remember_index((self.owner, chunk), (index, found.generation), index_cost)

    def read_ahead(self, key: str, chunk: Index) -> None:
        """A sequential reader is heading into this shard: on a remote store, fetch it whole
        unless its index is known (then it was read from before: the read fetches what it
        needs). Errors are left to that read, which reports them."""
        if not self.remote or not self._small_enough() or self.cached_index(chunk) is not None:
            return
        with contextlib.suppress(CodecError):
            self.load(chunk, key, whole=True)

    def read_early(self, key: str, chunk: Index, submit: Callable[..., object]) -> None:
        """A sequential reader will reach this shard after the ones it reads now: on a remote
        store, have it fetched whole (`submit` runs the fetch in the background), when the
        held shards, and those being fetched early, leave room for it without letting go
        of one not yet read."""
        if not self.remote or not self._small_enough() or self.cached_index(chunk) is not None:
            return
        with self._held_lock:
            expected = self._last_whole
            after = self._held_bytes + sum(self._early.values()) + expected
            if chunk in self._early or after > self._held_budget():
                return
            self._early[chunk] = expected
        submit(self._fetch_early, key, chunk)

    def _fetch_early(self, key: str, chunk: Index) -> None:
        try:
            self.read_ahead(key, chunk)
        finally:
            with self._held_lock:
                del self._early[chunk]

    def _small_enough(self) -> bool:
        return self.sharding.chunk.nbytes <= min(WHOLE_SHARD_BYTES, self._held_budget())

    def _held_budget(self) -> int:
        return int(self.cache.capacity * HELD_FRACTION)

    def _hold(self, chunk: Index, held: HeldShard) -> None:
        with self._held_lock:
            dropped = self._held.pop(chunk, None)
            self._held[chunk] = held
            freed = 0 if dropped is None else len(dropped.data)
            added = len(held.data)
            while self._held_bytes + added - freed > self._held_budget() and len(self._held) > 1:
                _, oldest = self._held.popitem(last=False)
                freed += len(oldest.data)
            self._held_bytes += added - freed
        self.cache.hold(added - freed, give_back=False)

    def _drop_held(self, chunk: Index) -> None:
        with self._held_lock:
            dropped = self._held.pop(chunk, None)
            if dropped is not None:
                self._held_bytes -= len(dropped.data)
        if dropped is not None:
            self.cache.hold(-len(dropped.data))

    def _take_held(self, chunk: Index, generation: str | None,
                   spans: dict[Index, ByteSpan]) -> dict[Index, BytesLike] | None:
        """The encoded inner chunks `spans` from the held shard of `generation`, if held;
        it is let go once every inner chunk was taken."""
        with self._held_lock:
            held = self._held.get(chunk)
            if held is None or held.generation != generation:
                return None
            held.left.difference_update(spans)
            finished = not held.left
            if finished:
                del self._held[chunk]
                self._held_bytes -= len(held.data)
        if finished:
            self.cache.hold(-len(held.data))
        view = memoryview(held.data)
        return {inner: self._own(view[span.offset : span.end]) for inner, span in spans.items()}

    def _own(self, piece: memoryview) -> BytesLike:
        """Without a bytes codec an inner chunk decodes to a view of its bytes: give each its
        own, so a cached chunk never keeps a whole request's (or shard's) bytes alive."""
        return piece if self.sharding.inner.bytes_codecs else bytes(piece)

    # -- inner chunks ------------------------------------------------------------------------

    def read_inner(self, key: str, chunk: Index, spans: dict[Index, ByteSpan | None],
                   generation: str) -> dict[Index, BytesLike] | None:
        """The encoded inner chunks of `spans` (the stored ones), from the held shard or read
        a stretch at a time; None when the shard is no longer the one of `generation`."""
        stored = {inner: span for inner, span in spans.items() if span is not None}
        taken = self._take_held(chunk, generation, stored)
        if taken is not None:
            for _ in stored:
                self.count_fetch(0)  # (its bytes were counted when the shard was fetched)
            return taken
        order = list(stored.items())
        if self.remote:
            requests = merge([(s.offset, s.end) for _, s in order], max_gap=REMOTE_GAP, gap_fraction=1.0)
            if len(requests) > 1 and worth_whole(requests, self.sharding.chunk.nbytes):
                requests = merge([(s.offset, s.end) for _, s in order], max_gap=1 << 62)
        else:
            requests = merge([(s.offset, s.end) for _, s in order], max_bytes=RUN_BYTES)
        found = self.store.read_ranges(key, [ByteRange(r.start, r.nbytes) for r in requests])
        if found is None or any(piece.generation != generation for piece in found):
            return None  # (deleted or rewritten since its index was read)
        encoded: dict[Index, BytesLike] = {}
        for position, request in enumerate(requests):
            piece = found[position].data
            if len(piece) != request.nbytes:
                last = order[request.members[-1]][0]
                raise CodecError(f"shard is truncated: inner chunk {last} lies past its end")
            view = memoryview(piece)
            for member in request.members:
                inner, span = order[member]
                self.count_fetch(span.nbytes)
                part = view[span.offset - request.start : span.end - request.start]
                encoded[inner] = self._own(part)
        return encoded


def index_cost(cached: CachedIndex) -> int:
    index = cached[0]
    return 128 + (0 if index is None else index.entries.nbytes)
