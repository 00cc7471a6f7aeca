"""The `sharding_indexed` codec: many inner chunks in one stored object, found by an index.

The index is an array of shape (*chunks_per_shard, 2) of uint64 (offset, nbytes), encoded
with its own codecs and stored at the start or the end of the shard; (2^64-1, 2^64-1) marks
an empty inner chunk. Inner chunks are always located through the index (zarr-python writes
them in Morton order, TensorStore in C order); we write them in C order.

Besides the full `encode`/`decode` the array layer uses the pieces separately: decode only the
index, fetch and decode only the inner chunks a read touches, and rebuild a shard reusing the
encoded bytes of inner chunks that did not change.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import MetadataError
from ..formats.description import CodecSpec
from ..formats.dtypes import CORE_TYPES as DATA_TYPES
from ..formats.v3 import parse_codec_list
from .base import (
    ArrayBytesCodec,
    BytesLike,
    ChunkSpec,
    CodecError,
    check_config_keys,
    config_choice,
)
from .pipeline import Pipeline, is_fill

EMPTY = (1 << 64) - 1
# The index is read whole (16 bytes per inner chunk): 2^24 entries is a 256 MiB index.
MAX_INNER_CHUNKS = 1 << 24
BEYOND = 1 << 62  # (no shard is this long: an entry past it is bad, and sums stay in uint64)
# An index of up to this many entries is checked in Python: numpy's dozen calls cost more on a
# few (64 entries: 12 us against 15-35 us, and 150-200 us of numpy's first calls in a process),
# far less on many (128: 22 us against 15 us; 65536: 20 ms against 1.3 ms).
FEW_ENTRIES = 64
InnerIndex = tuple[int, ...]


@dataclass(frozen=True)
class ByteSpan:
    offset: int
    nbytes: int

    @property
    def end(self) -> int:
        return self.offset + self.nbytes


class ShardIndex:
    """A decoded shard index: where each inner chunk lies, or that it is empty."""

    def __init__(self, entries: np.ndarray) -> None:
        self.entries = entries  # (*chunks_per_shard, 2) uint64

    def span(self, inner: InnerIndex) -> ByteSpan | None:
        offset, nbytes = (int(v) for v in self.entries[inner])
        return None if offset == EMPTY else ByteSpan(offset, nbytes)

    def spans_in_order(self) -> list[tuple[int, int] | None]:
        """(offset, nbytes) of every inner chunk in C order (None: empty), read out at once."""
        pairs: list[list[int]] = self.entries.reshape(-1, 2).tolist()
        return [None if offset == EMPTY else (offset, nbytes) for offset, nbytes in pairs]


def check_entries(entries: np.ndarray, low: int, high: int) -> None:
    """Entries (offset, nbytes; (..., 2) uint64) lie in bytes [low, high) of the shard, do not
    overlap, and are empty (both EMPTY) or not: raise CodecError else."""
    if entries.size <= 2 * FEW_ENTRIES:
        _check_few(entries.reshape(-1).tolist(), low, high)
    else:
        _check_many(entries[..., 0].reshape(-1), entries[..., 1].reshape(-1), low, high)


def _check_few(flat: list[int], low: int, high: int) -> None:
    """`check_entries` of a few entries (`flat`: offset, nbytes, offset, ...)."""
    spans = []
    pairs = iter(flat)
    for offset, nbytes in zip(pairs, pairs, strict=True):
        if offset == EMPTY or nbytes == EMPTY:
            if offset != nbytes:
                raise CodecError("shard index has a half-empty entry")
        else:
            spans.append((offset, offset + nbytes))
    # (in `_check_many`'s order: every entry's emptiness, then the bounds, then overlaps)
    if any(start < low or end > high or end - start >= BEYOND or start >= BEYOND for start, end in spans):
        raise CodecError("shard index entry points outside the shard")
    spans.sort(key=operator.itemgetter(0))  # (stable, as `_check_many`'s: a tie keeps its order)
    if any(end > start for (_, end), (start, _) in itertools.pairwise(spans)):
        raise CodecError("shard index entries overlap")


def _check_many(offsets: np.ndarray, sizes: np.ndarray, low: int, high: int) -> None:
    """`check_entries` of many entries, as arrays."""
    empty = offsets == EMPTY
    if not np.array_equal(empty, sizes == EMPTY):
        raise CodecError("shard index has a half-empty entry")
    offsets, sizes = offsets[~empty], sizes[~empty]
    if offsets.size == 0:
        return
    if (offsets >= BEYOND).any() or (sizes >= BEYOND).any():  # (their sum may wrap around)
        raise CodecError("shard index entry points outside the shard")
    ends = offsets + sizes
    if (offsets < low).any() or (ends > high).any():
        raise CodecError("shard index entry points outside the shard")
    order = np.argsort(offsets, kind="stable")
    if (ends[order][:-1] > offsets[order][1:]).any():
        raise CodecError("shard index entries overlap")


class ShardingCodec(ArrayBytesCodec):
    def __init__(
        self,
        chunk: ChunkSpec,
        inner_shape: tuple[int, ...],
        inner: Pipeline,
        index: Pipeline,
        index_at_start: bool,
    ) -> None:
        self.chunk = chunk
        self.inner_shape = inner_shape
        self.chunks_per_shard = tuple(s // c for s, c in zip(chunk.shape, inner_shape, strict=True))
        self.inner = inner
        self.index = index
        self.index_at_start = index_at_start
        size = index.encoded_size()
        assert size is not None
        self.index_nbytes = size

    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: ChunkSpec) -> ShardingCodec:
        check_config_keys(spec, {"chunk_shape", "codecs", "index_codecs", "index_location"})
        inner_shape = _parse_inner_shape(spec, chunk.shape)
        inner_spec = ChunkSpec(inner_shape, chunk.data_type, chunk.fill_value)
        inner = Pipeline.build(
            parse_codec_list(spec.configuration.get("codecs"), spec.option("codecs")), inner_spec
        )
        chunks_per_shard = tuple(s // c for s, c in zip(chunk.shape, inner_shape, strict=True))
        count = math.prod(chunks_per_shard)
        if count > MAX_INNER_CHUNKS:
            raise MetadataError(
                spec.option("chunk_shape"), f"{count} inner chunks per shard; the limit is {MAX_INNER_CHUNKS}"
            )
        index_spec = ChunkSpec((*chunks_per_shard, 2), DATA_TYPES["uint64"], b"\xff" * 8)
        index = Pipeline.build(
            parse_codec_list(spec.configuration.get("index_codecs"), spec.option("index_codecs")),
            index_spec,
        )
        if index.encoded_size() is None:
            raise MetadataError(spec.option("index_codecs"), "must have a fixed size (bytes, crc32c)")
        location = config_choice(spec, "index_location", "end", ("start", "end"))
        return cls(chunk, inner_shape, inner, index, location == "start")

    # -- index -------------------------------------------------------------------------------

    def index_span(self, shard_nbytes: int) -> ByteSpan:
        start = 0 if self.index_at_start else shard_nbytes - self.index_nbytes
        return ByteSpan(start, self.index_nbytes)

    def decode_index(self, raw: BytesLike, shard_nbytes: int | None) -> ShardIndex:
        """Decode and check an index; `shard_nbytes` bounds the entries when known."""
        if len(raw) != self.index_nbytes:
            raise CodecError(f"shard index holds {len(raw)} bytes, expected {self.index_nbytes}")
        # Its own bytes: the entries decode to a view of what they are given, and a view of the
        # whole shard's buffer would keep all of it alive as long as the index is cached (a
        # cold read over S3 held every shard it read: peak RSS +100 MB).
        entries = self.index.decode(bytes(raw))
        self._check_entries(entries, shard_nbytes)
        return ShardIndex(entries)

    def _check_entries(self, entries: np.ndarray, shard_nbytes: int | None) -> None:
        low = self.index_nbytes if self.index_at_start else 0
        high = BEYOND if shard_nbytes is None else shard_nbytes
        if not self.index_at_start and shard_nbytes is not None:
            high -= self.index_nbytes
        check_entries(entries, low, high)

    # -- inner chunks ------------------------------------------------------------------------

    def inner_positions(self) -> Iterator[InnerIndex]:
        return iter(np.ndindex(*self.chunks_per_shard))

    def decode_inner(self, data: BytesLike) -> np.ndarray:
        return self.inner.decode(data)

    def encode_inner(self, chunk: np.ndarray) -> BytesLike | None:
        """An inner chunk's bytes, or None when it holds only the fill value."""
        if is_fill(chunk, self.chunk.fill_value):
            return None
        return self.inner.encode(chunk)

    def assemble(self, encoded: Mapping[InnerIndex, BytesLike]) -> bytes:
        """A shard from encoded inner chunks, laid out in C order; absent ones are empty."""
        return b"".join(self.shard_parts(encoded))

    def shard_parts(self, encoded: Mapping[InnerIndex, BytesLike]) -> list[BytesLike]:
        """The pieces of `assemble`'s shard in order, its index the first or the last."""
        entries = np.full((*self.chunks_per_shard, 2), EMPTY, dtype=np.uint64)
        position = self.index_nbytes if self.index_at_start else 0
        pieces: list[BytesLike] = []
        for inner in self.inner_positions():
            data = encoded.get(inner)
            if data is None:
                continue
            entries[inner] = (position, len(data))
            pieces.append(data)
            position += len(data)
        index = self.index.encode(entries)
        return [index, *pieces] if self.index_at_start else [*pieces, index]

    # -- whole shards, as an ordinary array->bytes codec (nested sharding, opaque shards) ----

    def encoded_size(self) -> int | None:
        return None

    def encode(self, chunk: np.ndarray) -> BytesLike:
        encoded = {}
        for inner in self.inner_positions():
            data = self.encode_inner(chunk[self._inner_slices(inner)])
            if data is not None:
                encoded[inner] = data
        return self.assemble(encoded)

    def decode(self, data: BytesLike) -> np.ndarray:
        if len(data) < self.index_nbytes:
            raise CodecError(f"shard of {len(data)} bytes is shorter than its index")
        view = memoryview(data).cast("B")
        span = self.index_span(len(view))
        index = self.decode_index(view[span.offset : span.end], len(view))
        out = self.chunk.fill_array()
        for inner in self.inner_positions():
            found = index.span(inner)
            if found is not None:
                out[self._inner_slices(inner)] = self.decode_inner(view[found.offset : found.end])
        return out

    def _inner_slices(self, inner: InnerIndex) -> tuple[slice, ...]:
        return tuple(slice(i * c, (i + 1) * c) for i, c in zip(inner, self.inner_shape, strict=True))


def _parse_inner_shape(spec: CodecSpec, shard_shape: tuple[int, ...]) -> tuple[int, ...]:
    member = spec.option("chunk_shape")
    value = spec.configuration.get("chunk_shape")
    if (
        not isinstance(value, list)
        or len(value) != len(shard_shape)
        or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in value)
    ):
        raise MetadataError(member, f"expected {len(shard_shape)} positive integers, got {value!r}")
    if any(s % c for s, c in zip(shard_shape, value, strict=True)):
        raise MetadataError(member, f"{value} does not divide the shard shape {list(shard_shape)}")
    if math.prod(value) == 0:
        raise MetadataError(member, "zero-sized inner chunk")
    return tuple(value)
