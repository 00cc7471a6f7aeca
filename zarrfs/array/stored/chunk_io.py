"""Moving one chunk between the store and memory: plain chunks whole (`PlainChunkIO`), the
inner chunks of sharded arrays through their shard (`sharded_io.ShardedChunkIO`, the same
interface), with the counters and codec timings both share.

Every fetch reports the generation of the stored object it read, and every put is a
compare-and-swap against a generation (`zarrfs.store`): the write-back above merges again and
retries when another writer got there first."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...codecs import BytesLike, Pipeline, is_fill
from ...errors import ChunkError, StoreError
from ...grid import Index
from ...store import ByteRange, Described, Expect, Opened, Store, Versioned, read_opened
from ..cache import Counters, Fetched

log = logging.getLogger(__name__)
FAST_ENCODE_BYTES_PER_SECOND = 1 << 30  # a thread encoding this fast keeps up with requests
CHEAP_DECODE_SECONDS = 30e-6  # less than reading a chunk around its decoder costs (streaming)
MEASURED_DECODES = 16  # before an array's chunks are known to decode slowly


@dataclass
class Stats:
    """Counters for tests and benchmarks."""

    loads: int = 0
    bytes_fetched: int = 0
    stores: int = 0  # objects put or deleted (what was located before may have moved)


@dataclass(frozen=True)
class StoredChunk:
    """Where a read chunk's encoded bytes lie: bytes [offset, offset + nbytes) of the object
    `key`, as of its `generation`."""

    key: str
    offset: int
    nbytes: int
    generation: str | None


# Where a chunk is encoded: given the array's encoder and the elements, their encoding and the
# CPU seconds it took (`encoded_here`, unless the write-back decides otherwise:
# zarrfs.array.writes.policy).
EncodeWith = Callable[[Callable[[np.ndarray], BytesLike], np.ndarray], tuple[BytesLike, float]]


def encoded_here(encode: Callable[[np.ndarray], BytesLike], data: np.ndarray) -> tuple[BytesLike, float]:
    start = time.thread_time()  # (CPU: not the waits for a core or the interpreter lock)
    encoded = encode(data)
    return encoded, time.thread_time() - start


@dataclass
class StoredShard:
    """A shard as stored when a write-back starts: its generation and encoded inner chunks."""

    generation: str | None
    inner: dict[Index, BytesLike] = field(default_factory=dict)
    known: bool = True  # False: not read (every inner chunk is replaced)
    nbytes: int = 0  # the stored shard's bytes, which `inner` holds until the write-back ends


@dataclass
class Encoded:
    """A read chunk's encoded bytes as stored (None: not stored), and the generation of the
    stored object they came from, for a decoder elsewhere (`decoder`); or, `opened`, its
    local file or a disk cache's entry, for the decoder to read itself (its descriptor is the
    taker's to close)."""

    data: BytesLike | None
    generation: str | None
    opened: Opened | None = None

    @property
    def stored(self) -> bool:
        return self.data is not None or self.opened is not None


class PlainChunkIO:
    """Each stored object is one chunk, decoded and encoded whole."""

    def __init__(self, store: Store, pipeline: Pipeline, fill_value: bytes, stats: Stats,
                 counters: Counters, *, keep_fill: bool = False) -> None:
        """`keep_fill`: a chunk written equal to the fill value is stored, not deleted (as
        TensorStore's store_data_equal_to_fill_value; deleted is TensorStore's and
        zarr-python's default)."""
        self.keep_fill = keep_fill
        self.store = store
        self.pipeline = pipeline
        self.fill_value = fill_value
        self.stats = stats
        self.counters = counters
        self._lock = threading.Lock()
        self._encoding = (0, 0.0)  # bytes encoded, and the CPU seconds it took
        self._decoding = (0, 0.0)  # chunks decoded, and the CPU seconds it took
        # Fetched together, until `fetch` takes them: read, or a disk cache's entries opened.
        self._parked: dict[str, Versioned | Opened | None] = {}
        # What decodes a read chunk's bytes (bytes -> the chunk), one object for the array's
        # life (a decoding process keeps its pickle); None: decoded only here.
        self.decoder: Callable[[BytesLike], np.ndarray] | None = pipeline.decode
        self.encode_with: EncodeWith = encoded_here

    def location(self, unit: Index) -> tuple[Index, Index | None]:
        return unit, None

    def units_of(self, chunk: Index) -> list[Index]:
        """The read chunks a stored object holds."""
        return [chunk]

    def fetch(self, key: str, chunk: Index, inner: Index | None) -> Fetched:
        found = self.fetch_encoded(key, chunk, inner)
        return Fetched(None if found.data is None else self.decode_chunk(chunk, found.data), found.generation)

    def fetch_encoded(self, key: str, chunk: Index, inner: Index | None, *,
                      open_file: bool = False) -> Encoded:
        """A read chunk as stored; `open_file`: a local file, or a disk cache's entry,
        opened, not read (for a decoding process, which reads it itself)."""
        with self._lock:
            parked = key in self._parked
            found = self._parked.pop(key, None)
        if open_file and not parked:
            files, cached = self.store.local_files, self.store.cached_on_disk
            if files is not None:
                file = files.opened(key)
                if file is not None:
                    self.count_fetch(file.size)
                return Encoded(None, None if file is None else file.generation, file)
            found = None if cached is None else cached.open([key]).get(key)
            parked = found is not None
        if isinstance(found, Opened):
            if open_file:
                self.count_fetch(found.size)
                return Encoded(None, found.generation, found)
            found = _read_entry(found)
            parked = found is not None  # (else unsound: read through the disk cache, which drops it)
        if not parked:
            found = self.store.read(key)
        if found is None:
            return Encoded(None, None)
        self.count_fetch(len(found.data))
        return Encoded(found.data, found.generation)

    def fetch_encoded_run(self, key: str, chunk: Index, inners: Sequence[Index | None], *,
                          open_files: bool = False) -> Iterator[Encoded]:
        """As `fetch_run`, not decoded (for `decoder`); `open_files`: local files opened."""
        return (self.fetch_encoded(key, chunk, inner, open_file=open_files) for inner in inners)

    def decode_chunk(self, chunk: Index, data: BytesLike) -> np.ndarray:
        """A stored chunk decoded (every chunk of a regular grid has one shape)."""
        return self.timed_decode(self.pipeline.decode, data)

    def encode_chunk(self, chunk: Index, data: np.ndarray) -> BytesLike:
        return self.timed_encode(self.pipeline.encode, data)

    def fetch_run(self, key: str, chunk: Index, inners: Sequence[Index | None]) -> Iterator[Fetched]:
        """Read chunks of one stored object (a plain chunk is one), decoded one at a time."""
        for found in self.fetch_encoded_run(key, chunk, inners):
            decoded = None if found.data is None else self.decode_chunk(chunk, found.data)
            yield Fetched(decoded, found.generation)

    def locate(self, keys: Mapping[Index, str], *, by_rows: bool = False) -> dict[Index, StoredChunk]:
        """Where the read chunks of the stored objects `keys` (chunk -> key) lie now, by read
        chunk; those not stored are left out (`by_rows`: `Store.stats`)."""
        found = self.list_stored(keys.values(), by_rows=by_rows)
        return {chunk: StoredChunk(key, 0, described[0], described[1])
                for chunk, key in keys.items() if (described := found[key]) is not None}

    def list_stored(self, keys: Iterable[str], *, by_rows: bool = False) -> dict[str, Described]:
        """The size and generation of the stored objects `keys`: one look at them all, as
        `Store.stats` finds neighbouring keys (listings of their key prefixes)."""
        return self.store.stats(keys, dense=True, by_rows=by_rows)

    def read_object(self, key: str) -> Versioned | None:
        """A stored object's bytes, not decoded, and its generation (None: not stored)."""
        found = self.store.read(key)
        if found is not None:
            self.count_fetch(len(found.data))
        return found

    def read_located(self, where: StoredChunk) -> BytesLike:
        """A read chunk's encoded bytes, as `locate` found them (ChunkError: they changed)."""
        found = self.store.read(where.key, ByteRange(where.offset, where.nbytes))
        changed = found is None or len(found.data) != where.nbytes or (
            None not in (found.generation, where.generation) and found.generation != where.generation)
        if changed:
            raise ChunkError(where.key, "changed in the store since it was located (open the file again)")
        assert found is not None
        self.count_fetch(len(found.data))
        return found.data

    def read_unit_now(self, key: str, where: tuple[Index, Index | None], into: memoryview) -> Described:
        """Fill the start of `into` with a read chunk's stored bytes (`key`: its stored
        object's; `where`: its `location`) if that waits for nothing and they fit: their size
        and the stored object's generation ((-1, None): not stored); None when it would wait
        or they do not fit (part of `into` may have been written)."""
        files = self.store.local_files
        found = None if files is None else files.read_whole_cached(key, into)
        if found is not None and found[0] > 0:
            self.count_fetch(found[0])
        return found

    def forget_index(self, chunk: Index) -> None:
        """Plain chunks have no index."""

    def forget_stored(self) -> None:
        """Forget what is known of every stored object (the array changed shape: objects
        were deleted or rewritten). Plain chunks: nothing is kept beyond a job."""

    def read_ahead(self, key: str, chunk: Index) -> None:
        """A sequential reader is heading into this stored object (plain chunks: read as
        needed, each with one request)."""

    def read_early(self, key: str, chunk: Index) -> None:
        """A sequential reader will reach this stored object after the ones it reads now
        (plain chunks: read as needed)."""

    def read_together(self, keys: Sequence[str], *, early: bool = False) -> dict[str, str]:
        """A stream's job is about to read these chunks one after another: on S3, fetch them
        first all at once (one wait on the event loop for the lot, not one each; a fault is
        left to `fetch`, which reports it), held until `fetch` takes them or `let_go`. Those
        a disk cache holds are its entries opened, not read (`CachedOnDisk.open`: a decoding
        process reads them, as it reads a local store's files). `early`: chunks the disk
        cache holds are not held back by the check of their row in flight (`Store.read_many`):
        those read so, with the generations read, for `Store.confirm`."""
        unchecked: dict[str, str] = {}
        if not self.store.capabilities.batched_gets or len(keys) <= 1:
            return unchecked
        with contextlib.suppress(StoreError):
            cached, unchecked_early = self.store.cached_on_disk, unchecked if early else None
            opened_entries = {} if cached is None else cached.open(keys, unchecked=unchecked_early)
            self._park(opened_entries.items())
            rest = [key for key in keys if key not in opened_entries]
            found = self.store.read_many(rest, unchecked=unchecked_early) if rest else []
            self._park(zip(rest, found, strict=True))
        return unchecked

    def _park(self, found: Iterable[tuple[str, Versioned | Opened | None]]) -> None:
        with self._lock:
            for key, each in found:
                _close(self._parked.pop(key, None))  # (another job's, of the same chunk)
                self._parked[key] = each

    def let_go(self, keys: Sequence[str]) -> None:
        """Forget what `read_together` fetched of `keys` and `fetch` did not take."""
        with self._lock:
            for key in keys:
                _close(self._parked.pop(key, None))

    def stored_for_write(self, key: str, chunk: Index, units: int, whole: bool) -> StoredShard | None:
        """What a write-back must build on: nothing for plain chunks (each is written whole)."""
        return None

    def put(self, key: str, chunk: Index, arrays: dict[Index, np.ndarray], stored: StoredShard | None,
            expect: Expect, ready: Mapping[Index, BytesLike | None] | None = None) -> str | None:
        """Store a chunk if the stored object is still `expect`; its new generation. (`ready`:
        see ShardedChunkIO.put; plain chunks are not encoded ahead.)"""
        (data,) = arrays.values()
        self.stats.stores += 1
        if self.omits(data):
            self.store.delete(key, expect=expect)
            return None
        encoded = self.encode_chunk(chunk, data)
        generation = self.store.put(key, encoded, sync_directory=False, expect=expect)
        self.counters.add(bytes_stored=len(encoded))
        return generation

    def omits(self, data: np.ndarray) -> bool:
        """Whether a chunk (or inner chunk) of these elements is left out of the store."""
        return not self.keep_fill and is_fill(data, self.fill_value)

    def count_fetch(self, nbytes: int) -> None:
        self.count_fetches(1, nbytes)

    def count_fetches(self, count: int, nbytes: int) -> None:
        """`count` chunks of `nbytes` in all were read (here or by a decoding process)."""
        with self._lock:
            self.stats.loads += count
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
        encoded, seconds = self.encode_with(encode, data)
        self.counters.add(chunks_encoded=1, encode_seconds=seconds)
        self.note_encoding(data.nbytes, seconds)
        return encoded

    def note_encoding(self, nbytes: int, seconds: float) -> None:
        """`nbytes` were encoded in `seconds` of CPU (what `encodes_slowly` measures)."""
        with self._lock:
            self._encoding = (self._encoding[0] + nbytes, self._encoding[1] + seconds)

    @property
    def decodes_cheaply(self) -> bool:
        """Whether the chunks decoded so far took little CPU (yes until MEASURED_DECODES were)."""
        count, seconds = self._decoding
        return count < MEASURED_DECODES or seconds < CHEAP_DECODE_SECONDS * count

    def encode_seconds(self, nbytes: int) -> float:
        """The CPU encoding `nbytes` takes at the rate measured so far (0: nothing measured yet)."""
        done, seconds = self._encoding
        return nbytes * seconds / done if done else 0.0

    @property
    def encodes_slowly(self) -> bool:
        """Whether encoding this array's chunks costs more than a write request for their
        bytes does (~1 ms per MiB), or nothing was encoded yet."""
        nbytes, seconds = self._encoding
        return nbytes < FAST_ENCODE_BYTES_PER_SECOND * seconds or not nbytes


def _read_entry(entry: Opened) -> Versioned | None:
    """A disk cache's entry opened (`CachedOnDisk.open`), read here and closed: its bytes, or
    None when they fail its checksum."""
    try:
        data = read_opened(entry.fd, entry.size, entry.offset, entry.crc32c)
    finally:
        os.close(entry.fd)
    return None if data is None else Versioned(data, entry.generation)


def _close(parked: Versioned | Opened | None) -> None:
    """What was parked and is not taken: a disk cache's entry opened is closed."""
    if isinstance(parked, Opened):
        with contextlib.suppress(OSError):
            os.close(parked.fd)
