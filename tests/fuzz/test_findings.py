"""Regression tests of what fuzzing found (scripts/fuzz), one per cause, each on the smallest
input that showed it. The inputs themselves stay in tests/fuzz/corpus/*/crash-* (replayed by
test_replay.py); these say what the right behaviour is."""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import zstandard

from zarrfs.codecs import ChunkSpec, CodecError, Pipeline
from zarrfs.codecs.zstd import ZstdCodec
from zarrfs.errors import MetadataError, StoreError
from zarrfs.formats import consolidated_children, discover
from zarrfs.formats.documents import edit_consolidated, set_attributes
from zarrfs.formats.dtypes import CORE_TYPES
from zarrfs.formats.registry import xarray_fill_value
from zarrfs.formats.v3 import parse_codec_list, parse_metadata
from zarrfs.store import Store

from .fuzz_codecs import PIPELINES

pytestmark = pytest.mark.fast

ZARRAY = {"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<i4", "compressor": None,
          "fill_value": 0, "order": "C", "filters": None}


def test_attributes_set_on_a_listed_entry_that_is_not_a_document() -> None:
    """v3 consolidated metadata listing a non-object for a path: setting attributes there
    leaves it alone (was TypeError: 'str' object is not a mapping)."""
    group = {"zarr_format": 3, "node_type": "group", "attributes": {},
             "consolidated_metadata": {"kind": "inline", "must_understand": False,
                                       "metadata": {"a": "not a document", "b": {"node_type": "group"}}}}
    raw = json.dumps(group).encode()
    assert edit_consolidated(raw, 3, lambda nodes: set_attributes(nodes, "a", 3, {"x": 1})) is None
    edited = edit_consolidated(raw, 3, lambda nodes: set_attributes(nodes, "b", 3, {"x": 1}))
    assert edited is not None
    listed = json.loads(edited)["consolidated_metadata"]["metadata"]
    assert listed == {"a": "not a document", "b": {"node_type": "group", "attributes": {"x": 1}}}


def test_a_listed_array_document_that_is_not_an_object_is_a_metadata_error() -> None:
    """v2 .zmetadata listing a string as an array's .zarray (or .zattrs): opening the array
    is a MetadataError naming the file (was AttributeError: 'str' object has no attribute 'get')."""
    for listed in ({"a/.zarray": "<i4"}, {"a/.zarray": ZARRAY, "a/.zattrs": 7}):
        zmetadata = {"zarr_consolidated_format": 1, "metadata": {".zgroup": {"zarr_format": 2}, **listed}}
        group = discover({".zmetadata": json.dumps(zmetadata).encode()}.get, "")
        assert group is not None
        children = consolidated_children(group)
        assert children is not None and set(children) == {"a"}
        with pytest.raises(MetadataError) as refused:
            children["a"].describe()
        assert refused.value.member in (".zarray", ".zattrs")


@pytest.mark.parametrize("name", ["numcodecs.fletcher32", "numcodecs.crc32", "numcodecs.adler32",
                                  "numcodecs.jenkins_lookup3"])
@pytest.mark.parametrize("stored", [b"", b"\xb5", b"\x01\x02\x03"])
def test_a_chunk_shorter_than_its_checksum_is_a_codec_error(name: str, stored: bytes) -> None:
    """numcodecs' checksums index past a buffer shorter than the checksum (IndexError)."""
    with pytest.raises(CodecError):
        PIPELINES[name].decode(stored)


def _chunk_spec(dtype: str, shape: tuple[int, ...]) -> ChunkSpec:
    return ChunkSpec(shape, CORE_TYPES[dtype], bytes(CORE_TYPES[dtype].itemsize))


def test_a_filter_on_huge_chunks_allocates_little_at_open() -> None:
    """A document claiming 4 GiB chunks (the largest allowed) through a numcodecs filter:
    building its pipeline encoded a whole chunk of fill values (12 GB, 140 s); now a few."""
    specs = parse_codec_list([{"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}},
                              {"name": "bytes", "configuration": {"endian": "little"}}], "codecs")
    tracemalloc.start()
    try:
        pipeline = Pipeline.build(specs, _chunk_spec("int32", (1 << 30,)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak
    output = pipeline.array_codecs[0].output_spec()
    assert output.shape == (1 << 30,) and output.data_type.storage == np.dtype("int32")
    assert output.fill_value == bytes(4)


@pytest.mark.parametrize(("elements", "packed"), [(5, 2), (4096, 513), (10_000, 1251)])
def test_a_filter_that_changes_the_element_count_still_gets_its_output_shape(
        elements: int, packed: int) -> None:
    """packbits (one header byte, then 8 bools a byte): learnt from the whole chunk."""
    specs = parse_codec_list([{"name": "numcodecs.packbits"}, {"name": "bytes"}], "codecs")
    pipeline = Pipeline.build(specs, _chunk_spec("bool", (elements,)))
    assert pipeline.array_codecs[0].output_spec().shape == (packed,)
    values = np.arange(elements) % 3 == 0
    assert np.array_equal(pipeline.decode(pipeline.encode(values)), values)


_ZARRAY = json.dumps(ZARRAY)
MALFORMED_SETS = {
    "nested too deeply": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,  # was RecursionError
    "length not a number": {".zgroup": "{}", "x/.zarray": _ZARRAY, "x/0": ["data.bin", 0, "abc"]},
    "offset a list": {".zgroup": "{}", "x/.zarray": _ZARRAY, "x/0": ["data.bin", [], 4]},
    "negative": {".zgroup": "{}", "x/.zarray": _ZARRAY, "x/0": ["data.bin", -5, -3]},
    "past any index": {".zgroup": "{}", "x/.zarray": _ZARRAY, "x/0": ["data.bin", 0, 10**30]},
    "bad base64": {".zgroup": "{}", "x/.zarray": _ZARRAY, "x/0": "base64:A"},
    "two members": {"version": 1, "refs": {".zgroup": "{}", "x/0": ["data.bin", 4]}},
    "generated negative": {"version": 1, "refs": {".zgroup": "{}"}, "gen": [{
        "key": "x/{{i}}", "url": "data.bin", "offset": "{{i - 5}}", "length": "1",
        "dimensions": {"i": {"stop": 2}}}]},
}


@pytest.mark.parametrize("name", sorted(MALFORMED_SETS))
def test_a_malformed_reference_set_fails_to_open_naming_the_problem(name: str, tmp_path: Path) -> None:
    """Each was read when a key was (ValueError, TypeError, OverflowError, binascii.Error from
    fsspec), or not at all (RecursionError); now the set is refused when it is opened."""
    refs = MALFORMED_SETS[name]
    (tmp_path / "data.bin").write_bytes(bytes(64))
    (tmp_path / "refs.json").write_bytes(refs if isinstance(refs, bytes) else json.dumps(refs).encode())
    with pytest.raises(StoreError) as refused:
        Store.open(str(tmp_path / "refs.json"))
    assert "refs.json" in str(refused.value)


def test_a_well_formed_reference_set_still_opens(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(bytes(range(64)))
    refs = {"version": 1, "refs": {".zgroup": "{}", "x/.zarray": _ZARRAY, "x/0": "base64:AAECAw==",
                                   "x/1": ["data.bin", 8, 4]},
            "gen": [{"key": "y/{{i}}", "url": "data.bin", "offset": "{{i * 4}}", "length": "4",
                     "dimensions": {"i": {"stop": 2}}}]}
    (tmp_path / "refs.json").write_text(json.dumps(refs))
    store = Store.open(str(tmp_path / "refs.json"))
    assert store.get("x/0") == bytes(range(4))
    assert store.get("x/1") == bytes(range(8, 12))
    assert store.get("y/1") == bytes(range(4, 8))


def test_xarray_fill_value_of_a_v2_array_whose_zarray_is_not_json() -> None:
    """xarray's attributes beside a .zarray that is not JSON: no fill value stated, and
    opening the array says why (was json.JSONDecodeError from xarray_fill_value)."""
    files = {".zarray": b"{bad", ".zattrs": b'{"_ARRAY_DIMENSIONS": ["x"]}'}
    node = discover(files.get, "")
    assert node is not None and node.kind == "array"
    assert xarray_fill_value(node, node.attributes) is None
    with pytest.raises(MetadataError, match="not valid JSON"):
        node.describe()
    files[".zarray"] = json.dumps({**ZARRAY, "fill_value": 7}).encode()
    node = discover(files.get, "")
    assert node is not None and xarray_fill_value(node, node.attributes) == 7


def _v3_array(data_type: object, fill_value: object = 0) -> dict[str, object]:
    return {"zarr_format": 3, "node_type": "array", "shape": [1], "data_type": data_type,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1]}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": fill_value,
            "codecs": [{"name": "bytes"}]}


BAD_V3_TYPES = {  # each was a TypeError or ValueError from numpy, or accepted
    "r and 20 digits": "r" + "8" * 20,
    "r and an Arabic-Indic digit": "r\u0668",
    "a length numpy cannot hold": {"name": "fixed_length_utf32",
                                   "configuration": {"length_bytes": 4 * 10**14}},
    "raw bytes of 10**30": {"name": "raw_bytes", "configuration": {"length_bytes": 10**30}},
    "a scale numpy cannot hold": {"name": "numpy.datetime64",
                                  "configuration": {"unit": "s", "scale_factor": 10**30}},
    "a field named twice": {"name": "structured",
                            "configuration": {"fields": [["a", "uint8"], ["a", "uint8"]]}},
}


@pytest.mark.parametrize("name", sorted(BAD_V3_TYPES))
def test_v3_data_types_numpy_cannot_hold_are_metadata_errors(name: str) -> None:
    with pytest.raises(MetadataError) as refused:
        parse_metadata(json.dumps(_v3_array(BAD_V3_TYPES[name])))
    assert refused.value.member.startswith("data_type")


@pytest.mark.parametrize("document", [
    _v3_array("r2147483648", "AAAA"),  # 256 MiB elements
    _v3_array({"name": "raw_bytes", "configuration": {"length_bytes": 1 << 28}}, "AAAA"),
    {**ZARRAY, "shape": [1], "chunks": [1], "dtype": "|S268435456", "fill_value": None},
    {**ZARRAY, "shape": [1], "chunks": [1], "dtype": [["a", "<f8", [1 << 22]]], "fill_value": None},
])
def test_huge_elements_are_refused_before_anything_is_allocated(document: dict[str, object]) -> None:
    """A one-element array of 256 MiB elements took 1.2 GB and 14-20 s to open (its fill
    value held and converted whole several times); elements over 16 MiB are refused."""
    name = "zarr.json" if document.get("zarr_format") == 3 else ".zarray"
    node = discover({name: json.dumps(document).encode()}.get, "")
    assert node is not None
    tracemalloc.start()
    try:
        with pytest.raises(MetadataError, match="over the limit"):
            node.describe()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak


def test_the_largest_element_allowed_opens() -> None:
    node = discover({"zarr.json": json.dumps(_v3_array("r134217728", "AAAA")).encode()}.get, "")
    assert node is not None
    description = node.describe()
    assert description.data_type.itemsize == 1 << 24
    assert description.fill_value == b"\0" * (1 << 24)


def _unsized(data: bytes) -> bytes:
    streaming = zstandard.ZstdCompressor(level=1).compressobj()
    return streaming.compress(data) + streaming.flush()


WHOLE = _unsized(b"hello world " * 3)
CUT_FRAMES = {  # after a whole frame: numcodecs' decoder spun forever on each (found in a shard)
    "a frame header alone": WHOLE + bytes.fromhex("28b52ffd00"),
    "a frame cut short": WHOLE + _unsized(b"second frame " * 9)[:-3],
    "the shard's inner chunk": bytes.fromhex("28b52ffd004f8500005000000200000000000000010031c00228b52ffd00"),
}


@pytest.mark.parametrize("name", sorted(CUT_FRAMES))
@pytest.mark.parametrize("exact_size", [None, 36, 21])
def test_zstd_frames_cut_short_are_codec_errors_at_once(name: str, exact_size: int | None) -> None:
    codec = ZstdCodec(1, False)
    started = time.monotonic()
    with pytest.raises(CodecError):
        codec.decode(CUT_FRAMES[name], exact_size, 1 << 20)
    assert time.monotonic() - started < 1


def test_an_unsized_zstd_frame_expands_no_further_than_the_limit() -> None:
    bomb = _unsized(bytes(64 << 20))  # 64 MiB of zeros in a few KB, its size not declared
    tracemalloc.start()
    try:
        with pytest.raises(CodecError, match="exceeds the limit"):
            ZstdCodec(1, False).decode(bomb, None, 1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak
    assert bytes(ZstdCodec(1, False).decode(WHOLE + WHOLE, None, 100)) == b"hello world " * 6
