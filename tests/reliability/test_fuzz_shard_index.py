"""Property-based fuzzing of the shard index decoder: any bytes or entries either decode or
raise CodecError; a decoded index never points outside the shard and has no overlapping entries.
Positive controls: real shards decode with the right values, and the short and long index
checks agree."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.fuzz_documents import BYTES, FUZZ
from zarrfs.codecs import EMPTY, ChunkSpec, CodecError, ShardingCodec
from zarrfs.codecs.sharding import FEW_ENTRIES, check_entries
from zarrfs.formats import CodecSpec
from zarrfs.formats.dtypes import DATA_TYPES

# -- the shard index --------------------------------------------------------------------------

U64 = st.one_of(
    st.sampled_from([0, 1, 4, 16, 63, 64, 100, 2**32, 2**62 - 1, 2**62, 2**63, EMPTY - 1, EMPTY]),
    st.integers(0, EMPTY),
    st.integers(0, 600),
)


@st.composite
def sharding_codecs(draw: st.DrawFn) -> ShardingCodec:
    per_shard = draw(st.lists(st.integers(1, 3), min_size=1, max_size=2))
    inner = draw(st.lists(st.integers(1, 3), min_size=len(per_shard), max_size=len(per_shard)))
    index_codecs: list[dict[str, Any]] = [BYTES]
    if draw(st.booleans()):
        index_codecs.append({"name": "crc32c"})
    config = {
        "chunk_shape": inner,
        "codecs": [BYTES],
        "index_codecs": index_codecs,
        "index_location": draw(st.sampled_from(["start", "end"])),
    }
    shape = tuple(p * c for p, c in zip(per_shard, inner, strict=True))
    chunk = ChunkSpec(shape, DATA_TYPES["uint8"], b"\0")
    codec = ShardingCodec.from_spec(CodecSpec("sharding_indexed", config, "codecs[0]"), chunk)
    return codec


def check_index(codec: ShardingCodec, raw: bytes, shard_nbytes: int | None) -> bool:
    """Decode an index; if accepted, check its entries lie inside the shard and do not overlap.
    Whether it was accepted."""
    try:
        index = codec.decode_index(raw, shard_nbytes)
    except CodecError:
        return False
    low = codec.index_nbytes if codec.index_at_start else 0
    high = None
    if shard_nbytes is not None:
        high = shard_nbytes - (0 if codec.index_at_start else codec.index_nbytes)
    spans = []
    for position in codec.inner_positions():
        span = index.span(position)
        if span is None:
            assert int(index.entries[position][1]) == EMPTY
            continue
        assert span.offset >= low and span.nbytes >= 0
        if high is not None:
            assert span.end <= high, (span, shard_nbytes)
        spans.append(span)
    spans.sort(key=lambda s: s.offset)
    for a, b in itertools.pairwise(spans):
        assert a.end <= b.offset, (a, b)
    return True


@FUZZ
@given(sharding_codecs(), st.data())
def test_real_shards_decode(codec: ShardingCodec, data: st.DataObject) -> None:
    """The positive control of the shard tests: a shard the codec wrote (some inner chunks
    left empty) has an index that decodes, pointing at each stored inner chunk, and decodes
    to what was written."""
    shape = codec.chunk.shape
    flat = data.draw(st.lists(st.integers(0, 3), min_size=math.prod(shape),
                              max_size=math.prod(shape)), label="values")
    values = np.array(flat, dtype=np.uint8).reshape(shape)  # 0 is the fill value
    shard = bytes(codec.encode(values))
    span = codec.index_span(len(shard))
    raw = shard[span.offset : span.end]
    assert check_index(codec, raw, len(shard)), "refused the index of a real shard"
    assert check_index(codec, raw, None), "refused the index of a real shard (size unknown)"
    index = codec.decode_index(raw, len(shard))
    for position in codec.inner_positions():
        part = values[tuple(slice(i * c, (i + 1) * c)
                            for i, c in zip(position, codec.inner_shape, strict=True))]
        found = index.span(position)
        assert (found is None) == (not part.any()), (position, found)
        if found is not None:
            inner = codec.decode_inner(shard[found.offset : found.end])
            assert np.array_equal(inner, part), position
    decoded = codec.decode(shard)
    assert decoded.shape == shape and np.array_equal(decoded, values)


@FUZZ
@given(sharding_codecs(), st.binary(max_size=300), st.none() | st.integers(0, 2**64))
def test_shard_index_random_bytes(
    codec: ShardingCodec, raw: bytes, shard_nbytes: int | None
) -> None:
    check_index(codec, raw, shard_nbytes)
    # And the same length as a real index, so decoding gets past the length check.
    padded = (raw * (codec.index_nbytes // max(len(raw), 1) + 1))[: codec.index_nbytes]
    if len(padded) == codec.index_nbytes:
        check_index(codec, padded, shard_nbytes)


def test_shard_index_random_entries() -> None:
    outcomes: Counter[str] = Counter()

    @FUZZ
    @given(
        sharding_codecs(),
        st.data(),
        st.none() | st.integers(0, 2000) | st.sampled_from([2**62, 2**64]),
    )
    def run(codec: ShardingCodec, data: st.DataObject, shard_nbytes: int | None) -> None:
        count = math.prod(codec.chunks_per_shard)
        flat = data.draw(st.lists(U64, min_size=2 * count, max_size=2 * count), label="entries")
        entries = np.array(flat, dtype=np.uint64).reshape((*codec.chunks_per_shard, 2))
        raw = bytes(codec.index.encode(entries))
        outcomes["cases"] += 1
        outcomes["accepted"] += check_index(codec, raw, shard_nbytes)

    run()
    # Small offsets and sizes make some indexes valid (about one in six); a decoder that
    # refuses everything fails here.
    assert outcomes["accepted"] >= outcomes["cases"] // 20, outcomes


def check_outcome(entries: np.ndarray, low: int, high: int) -> str | None:
    try:
        check_entries(entries, low, high)
    except CodecError as e:
        return str(e)
    return None


@FUZZ
@given(st.lists(st.tuples(U64, U64) | st.just((EMPTY, EMPTY)), min_size=1, max_size=12),
       st.integers(0, 64), st.integers(0, 3000) | st.just(2**62))
def test_short_and_long_index_checks_agree(pairs: list[tuple[int, int]], low: int, high: int) -> None:
    """An index of a few entries is checked in Python, a long one with numpy: the same entries
    with empty ones added past FEW_ENTRIES are judged alike (the error named, or accepted)."""
    entries = np.array(pairs, dtype=np.uint64)
    padded = np.concatenate([np.full((FEW_ENTRIES, 2), EMPTY, dtype=np.uint64), entries])
    assert entries.size <= 2 * FEW_ENTRIES < padded.size
    assert check_outcome(entries, low, high) == check_outcome(padded, low, high)


def test_both_index_checks_refuse_each_kind_of_bad_entry() -> None:
    """The positive control of the test above: each bad entry is named by both checks."""
    cases = {
        "half-empty": [(EMPTY, 10)],
        "outside": [(60, 10)],
        "overlap": [(0, 10), (5, 10)],
    }
    for word, pairs in cases.items():
        entries = np.array(pairs, dtype=np.uint64)
        padded = np.concatenate([entries, np.full((FEW_ENTRIES, 2), EMPTY, dtype=np.uint64)])
        for checked in (entries, padded):
            found = check_outcome(checked, 0, 64)
            assert found is not None and word in found, (word, len(checked), found)
    assert check_outcome(np.array([(0, 10), (10, 54)], dtype=np.uint64), 0, 64) is None


@FUZZ
@given(sharding_codecs(), st.binary(max_size=400))
def test_shard_decode_random_bytes(codec: ShardingCodec, raw: bytes) -> None:
    try:
        chunk = codec.decode(raw)
    except CodecError:
        return
    assert chunk.shape == codec.chunk.shape
