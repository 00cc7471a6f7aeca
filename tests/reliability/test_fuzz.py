"""Property-based fuzzing of the parsers that see untrusted bytes.

* `parse_metadata` (and the codec pipeline built from what it returns): any input either parses
  or raises MetadataError; what parses survives a round trip through `to_json`.
* The shard index decoder: any bytes or entries either decode or raise CodecError; a decoded
  index never points outside the shard and has no overlapping entries.
* Codec chains (zstd, gzip, crc32c, sharding) given mutated chunks: CodecError or a chunk of the
  right shape, never anything else; behind a checksum, never wrong values.

A parser that refused everything would pass "parses or raises" checks, so each group also has
positive controls: valid documents, harmless mutations of them and real shards and chunks must
be accepted with the right values, and the fuzz tests count what they accepted.

blosc is left out on purpose: a mutated blosc header can crash the process (see the corpus
case chunks/blosc_cbytes_beyond_buffer), which would take the test run down with it.

tests/fuzz/ is the other half: coverage-guided atheris harnesses (scripts/fuzz) over every
input zarrfs parses, blosc and reference sets included, checking only that nothing but
zarrfs's own errors escapes; their corpus (seeded with VALID_DOCS) is replayed there.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from zarrfs.codecs import EMPTY, ChunkSpec, CodecError, Pipeline, ShardingCodec
from zarrfs.codecs.sharding import FEW_ENTRIES, check_entries
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


# Valid documents and the fill value each must parse to (raw bits, little-endian).
VALID: list[tuple[dict[str, Any], bytes]] = [
    (doc(), np.int16(0).tobytes()),
    (doc(
        data_type="float32",
        fill_value="NaN",
        codecs=[
            {"name": "transpose", "configuration": {"order": [1, 0]}},
            BYTES,
            {"name": "zstd", "configuration": {"level": 3, "checksum": True}},
            {"name": "crc32c"},
        ],
    ), (0x7FC00000).to_bytes(4, "little")),
    (doc(
        data_type="bool",
        fill_value=False,
        chunk_key_encoding={"name": "v2", "configuration": {"separator": "."}},
        codecs=[{"name": "bytes"}, {"name": "gzip", "configuration": {"level": 5}}],
    ), b"\0"),
    (doc(
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
    ), np.array([1.0, -np.inf], dtype="<f4").tobytes()),
    (doc(
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
    ), b"\xff" * 8),
    (doc(
        shape=[],
        chunk_grid={"name": "regular", "configuration": {"chunk_shape": []}},
        dimension_names=[],
        data_type="bfloat16",
        fill_value="0x7fc0",
    ), (0x7FC0).to_bytes(2, "little")),
]
VALID_DOCS = [document for document, _ in VALID]


def without(member: str, **changes: Any) -> dict[str, Any]:
    document = doc(**changes)
    del document[member]
    return document


# Changes to the first valid document that keep it valid: each must be accepted, with the
# values checked by `check_parsed`, so a parser that refuses too much fails here.
HARMLESS: dict[str, tuple[dict[str, Any], bytes]] = {
    "nested attributes": (
        doc(attributes={"nested": {"list": [None, True, 1.5, "x", {"deep": []}]}, "": 0}),
        np.int16(0).tobytes(),
    ),
    "no attributes": (without("attributes"), np.int16(0).tobytes()),
    "no dimension names": (without("dimension_names"), np.int16(0).tobytes()),
    "a null dimension name": (doc(dimension_names=[None, "x"]), np.int16(0).tobytes()),
    "negative fill": (doc(fill_value=-7), np.int16(-7).tobytes()),
    "integral float fill": (doc(fill_value=3.0), np.int16(3).tobytes()),
    "largest fill": (doc(fill_value=32767), np.int16(32767).tobytes()),
    "big endian": (
        doc(codecs=[{"name": "bytes", "configuration": {"endian": "big"}}]),
        np.int16(0).tobytes(),
    ),
    "chunks not dividing the shape": (
        doc(chunk_grid={"name": "regular", "configuration": {"chunk_shape": [3, 5]}}),
        np.int16(0).tobytes(),
    ),
    "chunks larger than the shape": (
        doc(chunk_grid={"name": "regular", "configuration": {"chunk_shape": [20, 30]}}),
        np.int16(0).tobytes(),
    ),
    "dot separator": (
        doc(chunk_key_encoding={"name": "default", "configuration": {"separator": "."}}),
        np.int16(0).tobytes(),
    ),
    "zero length": (doc(shape=[0, 12]), np.int16(0).tobytes()),
    "extension that need not be understood": (
        {**doc(), "my_extension": {"must_understand": False, "x": [1]}},
        np.int16(0).tobytes(),
    ),
    "empty storage transformers": (doc(storage_transformers=[]), np.int16(0).tobytes()),
    "gzip level 9": (
        doc(codecs=[BYTES, {"name": "gzip", "configuration": {"level": 9}}]),
        np.int16(0).tobytes(),
    ),
    "float NaN payload in hex": (doc(data_type="float32", fill_value="0x7f800001"),
                                 (0x7F800001).to_bytes(4, "little")),
    "float fill word": (doc(data_type="float64", fill_value="-Infinity"),
                        np.float64(-np.inf).tobytes()),
}


def open_fully(raw: bytes | str) -> bool:
    """Parse and build the pipeline; on success check the metadata survives a round trip.
    Whether the document was accepted."""
    try:
        meta = parse_metadata(raw)
        Pipeline.build(meta.codecs, ChunkSpec(meta.chunk_shape, meta.data_type, meta.fill_value))
    except MetadataError as e:
        assert isinstance(e.member, str), f"MetadataError without a member: {e!r}"
        return False
    again = parse_metadata(json.dumps(meta.to_json()))
    assert json.dumps(again.to_json(), sort_keys=True) == json.dumps(meta.to_json(), sort_keys=True)
    assert again.fill_value == meta.fill_value
    return True


def check_parsed(document: dict[str, Any], fill: bytes) -> None:
    """`document` is accepted, and parses to what it says."""
    raw = json.dumps(document)
    assert open_fully(raw), f"refused a valid document: {raw}"
    meta = parse_metadata(raw)
    assert meta.shape == tuple(document["shape"])
    assert meta.chunk_shape == tuple(document["chunk_grid"]["configuration"]["chunk_shape"])
    assert meta.data_type.name == document["data_type"]
    assert meta.fill_value == fill, (meta.fill_value, fill)
    assert [c.name for c in meta.codecs] == [c["name"] for c in document["codecs"]]
    encoding = document["chunk_key_encoding"]
    assert meta.chunk_key_encoding.name == encoding["name"]
    assert meta.chunk_key_encoding.separator == encoding["configuration"]["separator"]
    names = document.get("dimension_names")
    assert meta.dimension_names == (None if names is None else tuple(names))
    assert dict(meta.attributes) == document.get("attributes", {})


@pytest.mark.parametrize("which", range(len(VALID)))
def test_valid_documents_parse(which: int) -> None:
    check_parsed(*VALID[which])


@pytest.mark.parametrize("name", sorted(HARMLESS))
def test_harmless_changes_to_a_valid_document_are_accepted(name: str) -> None:
    check_parsed(*HARMLESS[name])


def is_valid_document(value: Any) -> bool:
    return any(value == valid for valid in VALID_DOCS)


def examples(*values: Any) -> Callable[[Any], Any]:
    """`@example(v)` for each value: cases hypothesis always tries first."""

    def apply(test: Any) -> Any:
        for value in values:
            test = example(value)(test)
        return test

    return apply


# The positive controls of the fuzz tests below: the valid documents themselves, which each
# test is given first and must accept.


@FUZZ
@given(st.binary(max_size=200))
@examples(*(json.dumps(valid).encode() for valid in VALID_DOCS))
def test_parse_metadata_random_bytes(raw: bytes) -> None:
    accepted = open_fully(raw)
    try:
        valid = is_valid_document(json.loads(raw))
    except ValueError:  # not JSON (UnicodeDecodeError is a ValueError)
        valid = False
    assert accepted or not valid, f"refused a valid document: {raw!r}"


@FUZZ
@given(JSON)
@examples(*VALID_DOCS)
def test_parse_metadata_random_json(value: Any) -> None:
    accepted = open_fully(json.dumps(value))
    assert accepted or not is_valid_document(value), f"refused a valid document: {value!r}"


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(sorted(doc())) | st.text(max_size=6),
        JSON,
        min_size=0,
        max_size=12,
    )
)
@examples(*({k: v for k, v in valid.items() if k not in ("zarr_format", "node_type")}
            for valid in VALID_DOCS))
def test_parse_metadata_random_members(members: dict[str, Any]) -> None:
    document = {"zarr_format": 3, "node_type": "array", **members}
    accepted = open_fully(json.dumps(document))
    assert accepted or not is_valid_document(document), f"refused a valid document: {document!r}"


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


# JSON without NaN or infinities, for values that must leave a document valid wherever it is
# (strict JSON has no such numbers, and a parser may fairly refuse them).
FINITE_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children,
                                                                      max_size=4),
    max_leaves=16,
)


def mutate(document: Any, data: st.DataObject) -> tuple[Any, bool]:
    """`document` changed in one place; and whether the change keeps a valid document valid
    (set an attribute, or add an extension member that need not be understood)."""
    action = data.draw(
        st.sampled_from(["replace", "delete", "insert", "special", "attribute", "extension"]),
        label="action",
    )
    if action == "attribute" and isinstance(document.get("attributes"), dict):
        key = data.draw(st.text(max_size=6), label="attribute")
        document["attributes"][key] = data.draw(FINITE_JSON, label="attribute value")
        return document, True
    if action == "extension":
        name = "x-" + data.draw(st.text(max_size=6), label="extension")
        config = data.draw(st.dictionaries(st.text(max_size=6), FINITE_JSON, max_size=3))
        document[name] = {**config, "must_understand": False}
        return document, True
    target = data.draw(st.sampled_from(paths(document)[1:]), label="path")
    parent = document
    for step in target[:-1]:
        parent = parent[step]
    last = target[-1]
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
    return document, False


def test_parse_metadata_mutated_valid_documents() -> None:
    outcomes: Counter[str] = Counter()

    @FUZZ
    @given(st.sampled_from(range(len(VALID_DOCS))), st.integers(1, 3), st.data())
    def run(which: int, count: int, data: st.DataObject) -> None:
        document = json.loads(json.dumps(VALID_DOCS[which]))
        harmless = True
        for _ in range(count):
            if not paths(document)[1:]:
                break
            document, kept_valid = mutate(document, data)
            harmless = harmless and kept_valid
        accepted = open_fully(json.dumps(document))
        assert accepted or not harmless, f"refused a harmless change: {document!r}"
        outcomes["cases"] += 1
        outcomes["harmless"] += harmless
        outcomes["accepted"] += accepted

    run()
    # About a fifth are only harmless changes and more are accepted; a parser that refuses
    # everything (or a strategy that stopped making valid documents) fails here.
    assert outcomes["harmless"] >= 10, outcomes
    assert outcomes["accepted"] >= outcomes["cases"] // 10, outcomes


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


# Chains where every stored byte that matters is under a checksum (gzip's CRC-32 of the data,
# crc32c, zstd's content checksum; the shard's index under crc32c, its chunks gzip): a
# mutated chunk they accept must decode to the original values.
CHECKSUMMED = {"zstd+checksum", "gzip", "crc32c", "crc32c+zstd", "sharding"}
ORIGINAL = np.arange(64, dtype=np.int32).reshape(8, 8) % 7


def chain(name: str) -> tuple[Pipeline, bytes]:
    spec = ChunkSpec((8, 8), DATA_TYPES["int32"], b"\0" * 4)
    pipeline = Pipeline.build(parse_codec_list(CHAINS[name], "codecs"), spec)
    good = bytes(pipeline.encode(ORIGINAL))
    return pipeline, good


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_codec_chain_decodes_its_own_chunk(name: str) -> None:
    """The positive control of the mutation test: the chunk unmutated decodes, exactly."""
    pipeline, good = chain(name)
    chunk = pipeline.decode(good)
    assert chunk.dtype == np.int32 and np.array_equal(chunk, ORIGINAL)


def _gzip_header_changed(good: bytes) -> bytes:
    # The header's MTIME (bytes 4-7), XFL (8) and OS (9) bytes are not under the CRC.
    assert good[:3] == b"\x1f\x8b\x08", good[:10]
    return good[:4] + b"\x12\x34\x56\x78\x02\x03" + good[10:]


def _shard_padded(good: bytes) -> bytes:
    # Inner chunks are found through the index, so bytes between them and the index (at the
    # end) are unused space, which a shard may have.
    index_nbytes = 16 * 4 + 4  # 2 x 2 inner chunks, offset and size each, then crc32c
    return good[:-index_nbytes] + b"\0" * 13 + good[-index_nbytes:]


HARMLESS_CHUNK_CHANGES = {
    "gzip": _gzip_header_changed,
    "sharding": _shard_padded,
}


@pytest.mark.parametrize("name", sorted(HARMLESS_CHUNK_CHANGES))
def test_codec_chain_accepts_harmless_changes(name: str) -> None:
    pipeline, good = chain(name)
    changed = HARMLESS_CHUNK_CHANGES[name](good)
    assert changed != good
    chunk = pipeline.decode(changed)
    assert chunk.dtype == np.int32 and np.array_equal(chunk, ORIGINAL)


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
        # (A mutation may leave the bytes as they were: that chunk must still decode.)
        assert bytes(buffer) != good, "refused the unchanged chunk"
        return
    assert chunk.shape == (8, 8) and chunk.dtype == np.int32
    if name in CHECKSUMMED or bytes(buffer) == good:
        assert np.array_equal(chunk, ORIGINAL), "accepted a corrupt chunk, with wrong values"
