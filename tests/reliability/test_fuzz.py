"""Property-based fuzzing of the parsers that see untrusted bytes.

* `parse_metadata` (and the codec pipeline built from what it returns): any input either parses
  or raises MetadataError; what parses survives a round trip through `to_json`.
* The shard index decoder: any bytes or entries either decode or raise CodecError; a decoded
  index never points outside the shard and has no overlapping entries.
* Codec chains (zstd, gzip, crc32c, sharding) given mutated chunks: CodecError or a chunk of the
  right shape, never anything else.

blosc is left out on purpose: a mutated blosc header can crash the process (see the corpus
case chunks/blosc_cbytes_beyond_buffer), which would take the test run down with it.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zarrfs.codecs import EMPTY, ChunkSpec, CodecError, Pipeline, ShardingCodec
from zarrfs.errors import MetadataError
from zarrfs.formats import CodecSpec
from zarrfs.formats.dtypes import DATA_TYPES
from zarrfs.formats.v3 import parse_codec_list, parse_metadata

# Locally every run explores new examples (and replays past failures from .hypothesis/); under
# CI (CI set in the environment) the examples are the same every time, so CI does not fail on
# a bug it happened to find today but not yesterday.
IN_CI = bool(os.environ.get("CI"))
FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=IN_CI,
    database=None if IN_CI else settings.default.database,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- metadata ---------------------------------------------------------------------------------

SPECIAL_INTS = [
    0,
    1,
    -1,
    2,
    3,
    4,
    8,
    255,
    256,
    2**31,
    2**32,
    2**53 + 1,
    2**62,
    2**63,
    2**64,
    -(2**63),
    10**30,
]
SPECIAL_SCALARS = st.sampled_from(
    [
        None,
        True,
        False,
        0.0,
        -0.0,
        1.5,
        1e300,
        -1e300,
        float("inf"),
        float("-inf"),
        float("nan"),
        "",
        "NaN",
        "Infinity",
        "-Infinity",
        "0x7fc00000",
        "0x",
        "0xZZ",
        "bytes",
        "zstd",
        "regular",
        "default",
        "v2",
        "/",
        ".",
        "int32",
        "bool",
        "float64",
        "complex64",
        "C",
        "F",
        "start",
        "end",
        "little",
        "big",
        *SPECIAL_INTS,
    ]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=10)
    | SPECIAL_SCALARS
)
JSON = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(max_size=10) | st.sampled_from(["name", "configuration"]), children, max_size=4
        )
    ),
    max_leaves=16,
)

BYTES: dict[str, Any] = {"name": "bytes", "configuration": {"endian": "little"}}


def doc(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [10, 12],
        "data_type": "int16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 6]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [BYTES],
        "attributes": {"a": [1, 2]},
        "dimension_names": ["y", "x"],
    }
    base.update(changes)
    return base


VALID_DOCS = [
    doc(),
    doc(
        data_type="float32",
        fill_value="NaN",
        codecs=[
            {"name": "transpose", "configuration": {"order": [1, 0]}},
            BYTES,
            {"name": "zstd", "configuration": {"level": 3, "checksum": True}},
            {"name": "crc32c"},
        ],
    ),
    doc(
        data_type="bool",
        fill_value=False,
        chunk_key_encoding={"name": "v2", "configuration": {"separator": "."}},
        codecs=[{"name": "bytes"}, {"name": "gzip", "configuration": {"level": 5}}],
    ),
    doc(
        data_type="complex64",
        fill_value=[1.0, "-Infinity"],
        codecs=[
            BYTES,
            {
                "name": "blosc",
                "configuration": {
                    "cname": "zstd",
                    "clevel": 5,
                    "shuffle": "bitshuffle",
                    "typesize": 8,
                    "blocksize": 0,
                },
            },
        ],
    ),
    doc(
        shape=[16, 16],
        chunk_grid={"name": "regular", "configuration": {"chunk_shape": [8, 8]}},
        data_type="uint64",
        fill_value=2**64 - 1,
        codecs=[
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": [4, 2],
                    "index_location": "start",
                    "codecs": [BYTES, {"name": "zstd", "configuration": {"level": 1}}],
                    "index_codecs": [BYTES, {"name": "crc32c"}],
                },
            }
        ],
    ),
    doc(
        shape=[],
        chunk_grid={"name": "regular", "configuration": {"chunk_shape": []}},
        dimension_names=[],
        data_type="bfloat16",
        fill_value="0x7fc0",
    ),
]


def open_fully(raw: bytes | str) -> None:
    """Parse and build the pipeline; on success check the metadata survives a round trip."""
    try:
        meta = parse_metadata(raw)
        Pipeline.build(meta.codecs, ChunkSpec(meta.chunk_shape, meta.data_type, meta.fill_value))
    except MetadataError as e:
        assert isinstance(e.member, str), f"MetadataError without a member: {e!r}"
        return
    again = parse_metadata(json.dumps(meta.to_json()))
    assert json.dumps(again.to_json(), sort_keys=True) == json.dumps(meta.to_json(), sort_keys=True)
    assert again.fill_value == meta.fill_value


def test_valid_documents_parse() -> None:
    for valid in VALID_DOCS:
        meta = parse_metadata(json.dumps(valid))
        Pipeline.build(meta.codecs, ChunkSpec(meta.chunk_shape, meta.data_type, meta.fill_value))


@FUZZ
@given(st.binary(max_size=200))
def test_parse_metadata_random_bytes(raw: bytes) -> None:
    open_fully(raw)


@FUZZ
@given(JSON)
def test_parse_metadata_random_json(value: Any) -> None:
    open_fully(json.dumps(value))


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(sorted(doc())) | st.text(max_size=6),
        JSON,
        min_size=0,
        max_size=12,
    )
)
def test_parse_metadata_random_members(members: dict[str, Any]) -> None:
    open_fully(json.dumps({"zarr_format": 3, "node_type": "array", **members}))


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a JSON document (the root included)."""
    found = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            found += paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += paths(v, (*prefix, i))
    return found


def mutate(document: Any, data: st.DataObject) -> Any:
    target = data.draw(st.sampled_from(paths(document)[1:]), label="path")
    parent = document
    for step in target[:-1]:
        parent = parent[step]
    last = target[-1]
    action = data.draw(st.sampled_from(["replace", "delete", "insert", "special"]), label="action")
    if action == "delete":
        del parent[last]
    elif action == "insert":
        if isinstance(parent, list):
            parent.insert(last, data.draw(JSON))
        else:
            parent[data.draw(st.text(max_size=6), label="new key")] = data.draw(JSON)
    elif action == "special":
        parent[last] = data.draw(SPECIAL_SCALARS | st.sampled_from(SPECIAL_INTS), label="special")
    else:
        parent[last] = data.draw(JSON, label="value")
    return document


@FUZZ
@given(st.sampled_from(range(len(VALID_DOCS))), st.integers(1, 3), st.data())
def test_parse_metadata_mutated_valid_documents(
    which: int, count: int, data: st.DataObject
) -> None:
    document = json.loads(json.dumps(VALID_DOCS[which]))
    for _ in range(count):
        if not paths(document)[1:]:
            break
        document = mutate(document, data)
    open_fully(json.dumps(document))


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


def check_index(codec: ShardingCodec, raw: bytes, shard_nbytes: int | None) -> None:
    try:
        index = codec.decode_index(raw, shard_nbytes)
    except CodecError:
        return
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


@FUZZ
@given(
    sharding_codecs(), st.data(), st.none() | st.integers(0, 2000) | st.sampled_from([2**62, 2**64])
)
def test_shard_index_random_entries(
    codec: ShardingCodec, data: st.DataObject, shard_nbytes: int | None
) -> None:
    count = math.prod(codec.chunks_per_shard)
    flat = data.draw(st.lists(U64, min_size=2 * count, max_size=2 * count), label="entries")
    entries = np.array(flat, dtype=np.uint64).reshape((*codec.chunks_per_shard, 2))
    raw = bytes(codec.index.encode(entries))
    check_index(codec, raw, shard_nbytes)


@FUZZ
@given(sharding_codecs(), st.binary(max_size=400))
def test_shard_decode_random_bytes(codec: ShardingCodec, raw: bytes) -> None:
    try:
        chunk = codec.decode(raw)
    except CodecError:
        return
    assert chunk.shape == codec.chunk.shape


# -- codec chains given mutated chunks --------------------------------------------------------

CHAINS = {
    "zstd": [BYTES, {"name": "zstd", "configuration": {"level": 3, "checksum": False}}],
    "zstd+checksum": [BYTES, {"name": "zstd", "configuration": {"level": 3, "checksum": True}}],
    "gzip": [BYTES, {"name": "gzip", "configuration": {"level": 6}}],
    "crc32c": [BYTES, {"name": "crc32c"}],
    "crc32c+zstd": [BYTES, {"name": "crc32c"}, {"name": "zstd", "configuration": {"level": 1}}],
    "sharding": [
        {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [4, 4],
                "codecs": [BYTES, {"name": "gzip", "configuration": {"level": 1}}],
                "index_codecs": [BYTES, {"name": "crc32c"}],
            },
        }
    ],
}


def chain(name: str) -> tuple[Pipeline, bytes]:
    spec = ChunkSpec((8, 8), DATA_TYPES["int32"], b"\0" * 4)
    pipeline = Pipeline.build(parse_codec_list(CHAINS[name], "codecs"), spec)
    good = bytes(pipeline.encode(np.arange(64, dtype=np.int32).reshape(8, 8) % 7))
    return pipeline, good


@pytest.mark.parametrize("name", sorted(CHAINS))
@settings(FUZZ, max_examples=150)
@given(data=st.data())
def test_codec_chain_mutated_chunks(name: str, data: st.DataObject) -> None:
    pipeline, good = chain(name)
    buffer = bytearray(good)
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        if not buffer:
            break
        position = data.draw(st.integers(0, len(buffer) - 1), label="position")
        kind = data.draw(st.sampled_from(["set", "cut", "insert"]), label="kind")
        if kind == "set":
            buffer[position] = data.draw(st.integers(0, 255), label="byte")
        elif kind == "cut":
            del buffer[position:]
        else:
            buffer[position:position] = data.draw(st.binary(min_size=1, max_size=8), label="bytes")
    try:
        chunk = pipeline.decode(bytes(buffer))
    except CodecError:
        return
    assert chunk.shape == (8, 8) and chunk.dtype == np.int32
