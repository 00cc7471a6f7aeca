"""What zarrfs does to the store when it writes: chunks and shards that become all fill value
are deleted (by bits: -0.0 and other NaNs are not the fill value), rewriting one inner chunk
keeps every other inner chunk's encoded bytes, a read of one inner chunk fetches only the
index and that chunk, and deterministic codecs encode exactly as TensorStore does."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.interop_cases import zero
from tests.helpers.interop_docs import (
    array_json,
    blosc,
    bytes_codec,
    default_bytes,
    gzip,
    sharding,
    transpose,
    zstd,
)
from tests.helpers.interop_io import (
    read_tensorstore,
    read_zarr_python,
    write_tensorstore,
    write_zarr_python,
    write_zarrfs,
)
from tests.helpers.interop_model import EMPTY, Case, inner_chunk_bytes, shard_index, stored_keys
from tests.helpers.interop_values import assert_same_bits, element, random_values
from zarrfs.array import ZarrArray
from zarrfs.array_metadata import create_array, open_array
from zarrfs.formats.v3 import metadata_from_json
from zarrfs.grid import Box
from zarrfs.store import Store


def _open(path: str, **options: Any) -> ZarrArray:
    return open_array(Store.open(path), threads=2, **options)


def _write(path: str, box: Box, values: Any, data_type: str) -> None:
    """Write one box through a freshly opened array (nothing cached) and flush."""
    array = _open(path)
    try:
        array.write(box, np.broadcast_to(np.asarray(values, dtype=_storage(data_type)),
                                         box.shape).copy())
        array.flush()
    finally:
        array.close()


def _storage(data_type: str) -> np.dtype[Any]:
    return random_values(data_type, (1,), np.random.default_rng(0)).dtype


# -- chunks that become all fill are deleted ---------------------------------------------------

FILL_CASES = {
    # name: (data type, fill value, a value equal to it but not bit for bit, or None)
    "uint16": ("uint16", 7, None),
    "float32-negative-zero": ("float32", -0.0, 0.0),
    "float64-nan-payload": ("float64", "0x7ff8000000000001", "NaN"),
    "float32-nan": ("float32", "NaN", "0x7fc00001"),
    "complex64-nan": ("complex64", ["NaN", 0.0], ["NaN", -0.0]),
    "bool-true": ("bool", True, None),
    "bfloat16-nan-payload": ("bfloat16", "0x7fc1", "NaN"),
}


@pytest.mark.parametrize("name", list(FILL_CASES))
@pytest.mark.parametrize("keep_cache", [False, True], ids=["reopened", "same-array"])
def test_chunk_overwritten_with_fill_is_deleted(name: str, keep_cache: bool,
                                                scratch: Path) -> None:
    data_type, fill_json, lookalike = FILL_CASES[name]
    fill = element(fill_json, data_type)[0]
    doc = array_json(data_type, [4, 6], [2, 3], [default_bytes(data_type), zstd(1)], fill_json)
    path = str(scratch / "array")
    model = random_values(data_type, (4, 6), np.random.default_rng(1))
    write_zarrfs(path, doc, model)
    assert stored_keys(path) == {"c/0/0", "c/0/1", "c/1/0", "c/1/1"}

    array = _open(path) if keep_cache else None

    def write(box: Box, value: Any) -> None:
        model[box.slices()] = value
        if array is None:
            _write(path, box, value, data_type)
        else:
            array.write(box, np.full(box.shape, value, dtype=model.dtype))
            array.flush()

    try:
        write(Box((0, 0), (2, 3)), fill)  # a whole chunk
        assert stored_keys(path) == {"c/0/1", "c/1/0", "c/1/1"}
        write(Box((0, 3), (1, 6)), fill)  # half a chunk: still stored
        assert "c/0/1" in stored_keys(path)
        write(Box((1, 3), (2, 6)), fill)  # the other half: now all fill
        assert stored_keys(path) == {"c/1/0", "c/1/1"}
        write(Box((0, 0), (4, 6)), fill)  # everything
        assert stored_keys(path) == set()
        if lookalike is not None:
            write(Box((2, 3), (4, 6)), element(lookalike, data_type)[0])
            assert stored_keys(path) == {"c/1/1"}, "a lookalike of the fill value was dropped"
        write(Box((3, 5), (4, 6)), random_values(data_type, (1, 1), np.random.default_rng(2)))
    finally:
        if array is not None:
            array.close()
    seen, _ = read_tensorstore(path)
    assert_same_bits(seen, model, "TensorStore after the overwrites")
    assert_same_bits(_read_all(path), model, "zarrfs after the overwrites")


def _read_all(path: str) -> np.ndarray:
    array = _open(path)
    try:
        return np.array(array.read(Box((0,) * len(array.shape), array.shape)))
    finally:
        array.close()


@pytest.mark.parametrize("location", ["start", "end"])
@pytest.mark.parametrize("keep_cache", [False, True], ids=["reopened", "same-array"])
def test_shard_whose_inner_chunks_are_all_fill_is_deleted(location: str, keep_cache: bool,
                                                          scratch: Path) -> None:
    doc = array_json("int32", [8, 6], [4, 6], [sharding([2, 3], [bytes_codec(), gzip(1)],
                                                        location=location)], -1)
    case = Case("shard", doc)
    path = str(scratch / "array")
    model = np.full((8, 6), -1, dtype=np.int32)
    model[0:2, 0:3] = 5  # inner chunk (0, 0) of shard (0, 0)
    model[3, 5] = 6  # inner chunk (1, 1) of shard (0, 0)
    model[7, 0] = 7  # shard (1, 0)
    write_zarrfs(path, doc, model)
    with open(f"{path}/c/0/0", "rb") as f:
        entries = shard_index(case, f.read())
    assert [int(entries[i][0]) != EMPTY for i in np.ndindex(2, 2)] == [True, False, False, True]

    array = _open(path) if keep_cache else None

    def write(box: Box) -> None:
        model[box.slices()] = -1
        if array is None:
            _write(path, box, -1, "int32")
        else:
            array.write(box, np.full(box.shape, -1, dtype=np.int32))
            array.flush()

    try:
        write(Box((0, 0), (1, 3)))  # part of inner chunk (0, 0): the shard stays as it was
        write(Box((1, 0), (2, 3)))  # the rest of it: inner chunk (0, 0) becomes empty
        assert stored_keys(path) == {"c/0/0", "c/1/0"}
        with open(f"{path}/c/0/0", "rb") as f:
            shard = f.read()
        entries = shard_index(case, shard)
        assert [int(entries[i][0]) != EMPTY for i in np.ndindex(2, 2)] == [False] * 3 + [True]
        assert len(inner_chunk_bytes(case, shard)) == 1
        write(Box((2, 3), (4, 6)))  # the last non-fill inner chunk: the shard goes
        assert stored_keys(path) == {"c/1/0"}
        write(Box((4, 0), (8, 6)))
        assert stored_keys(path) == set()
    finally:
        if array is not None:
            array.close()
    seen, _ = read_tensorstore(path)
    assert_same_bits(seen, model, "TensorStore after the overwrites")


# -- rewriting one inner chunk keeps the others' bytes ---------------------------------------

WRITERS = {
    "zarrfs": write_zarrfs,
    "tensorstore": write_tensorstore,
    "zarr-python": write_zarr_python,  # writes inner chunks in Morton order
}


@pytest.mark.parametrize("location", ["start", "end"])
@pytest.mark.parametrize("writer", list(WRITERS))
def test_rewriting_one_inner_chunk_keeps_the_others_bytes(writer: str, location: str,
                                                          scratch: Path) -> None:
    codecs = [sharding([2, 3], [bytes_codec(), blosc("zstd", 5, "shuffle", 4)],
                       location=location)]
    doc = array_json("float32", [8, 12], [4, 12], codecs, 0)
    case = Case("rewrite", doc)
    path = str(scratch / "array")
    model = random_values("float32", (8, 12), np.random.default_rng(3))
    WRITERS[writer](path, doc, model)
    before = {key: _file(path, key) for key in stored_keys(path)}
    inner_before = inner_chunk_bytes(case, before["c/0/0"])
    assert len(inner_before) == 8

    # Change part of inner chunk (1, 2) of shard (0, 0): elements [2:4, 6:9].
    box = Box((3, 7), (4, 9))
    new = random_values("float32", box.shape, np.random.default_rng(4))
    model[box.slices()] = new
    array = _open(path)
    try:
        array.write(box, new)
        array.flush()
    finally:
        array.close()

    after = {key: _file(path, key) for key in stored_keys(path)}
    assert after["c/1/0"] == before["c/1/0"], "an untouched shard was rewritten"
    inner_after = inner_chunk_bytes(case, after["c/0/0"])
    assert set(inner_after) == set(inner_before)
    for inner, encoded in inner_before.items():
        if inner == (1, 2):
            assert inner_after[inner] != encoded
        else:
            assert inner_after[inner] == encoded, f"inner chunk {inner} was re-encoded"
    for read in (read_tensorstore, read_zarr_python):
        seen, _ = read(path)
        assert_same_bits(seen, model, f"{read.__name__} after the rewrite")


def _file(path: str, key: str) -> bytes:
    with open(os.path.join(path, key), "rb") as f:
        return f.read()


# -- partial reads -----------------------------------------------------------------------------


@pytest.mark.parametrize("inner_codecs", ["bytes", "zstd-crc32c"])
@pytest.mark.parametrize("location", ["start", "end"])
@pytest.mark.parametrize("writer", ["zarrfs", "tensorstore", "zarr-python"])
def test_reading_one_inner_chunk_fetches_only_the_index_and_that_chunk(
    writer: str, location: str, inner_codecs: str, scratch: Path
) -> None:
    inner = [bytes_codec()] + ([zstd(3), {"name": "crc32c"}] if inner_codecs != "bytes" else [])
    doc = array_json("uint16", [64, 64], [64, 64], [sharding([8, 8], inner, location=location)], 0)
    case = Case("big-shard", doc)
    path = str(scratch / "array")
    model = random_values("uint16", (64, 64), np.random.default_rng(5))
    model[56:64, 56:64] = 0  # inner chunk (7, 7) is missing
    WRITERS[writer](path, doc, model)
    shard = _file(path, "c/0/0")
    sizes = {i: len(b) for i, b in inner_chunk_bytes(case, shard).items()}
    index_nbytes = 64 * 16 + 4

    array = _open(path, cache_bytes=1 << 20)
    try:
        got = array.read(Box((9, 9), (12, 15)))  # inside inner chunk (1, 1)
        assert_same_bits(got, model[9:12, 9:15], "a partial read")
        assert array.stats.bytes_fetched == index_nbytes + sizes[(1, 1)]
        assert array.stats.loads == 2
        array.read(Box((8, 8), (16, 16)))  # the same inner chunk: cached
        assert array.stats.bytes_fetched == index_nbytes + sizes[(1, 1)]
        array.read(Box((40, 17), (41, 18)))  # another inner chunk: the index is cached
        assert array.stats.bytes_fetched == index_nbytes + sizes[(1, 1)] + sizes[(5, 2)]
        fetched = array.stats.bytes_fetched
        got = array.read(Box((57, 57), (64, 64)))  # a missing inner chunk: nothing to fetch
        assert_same_bits(got, model[57:64, 57:64], "a missing inner chunk")
        assert array.stats.bytes_fetched == fetched
        assert array.stats.bytes_fetched < len(shard) // 4
    finally:
        array.close()


def test_reading_one_chunk_fetches_only_that_chunk(scratch: Path) -> None:
    doc = array_json("int64", [40, 40], [10, 10], [bytes_codec(), gzip(1)], 0)
    path = str(scratch / "array")
    model = random_values("int64", (40, 40), np.random.default_rng(6))
    write_tensorstore(path, doc, model)
    array = _open(path)
    try:
        assert_same_bits(array.read(Box((12, 13), (15, 20))), model[12:15, 13:20], "a read")
        assert array.stats.bytes_fetched == len(_file(path, "c/1/1"))
        assert array.stats.loads == 1
    finally:
        array.close()


# -- deterministic codecs encode as TensorStore does --------------------------------------------
# (Not gzip: TensorStore's deflate differs from zlib's on small inputs; both are valid. Not int4:
# TensorStore stores whatever high nibble its in-memory int4 has.)

SAME_BYTES: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "bytes-little": ("int32", [bytes_codec("little")]),
    "bytes-big": ("float64", [bytes_codec("big")]),
    "bool": ("bool", [bytes_codec(None)]),
    "bfloat16": ("bfloat16", [bytes_codec("big")]),
    "transpose-big-endian": ("uint16", [transpose([1, 0]), bytes_codec("big")]),
    "crc32c": ("complex64", [bytes_codec(), {"name": "crc32c"}]),
    "sharding-end": ("uint16", [sharding([2, 3], [bytes_codec(), {"name": "crc32c"}])]),
    "sharding-start": ("uint16", [sharding([2, 3], [bytes_codec()], location="start")]),
    "sharding-nested": ("int8", [sharding([2, 3], [sharding([1, 3], [bytes_codec(None)])])]),
}


@pytest.mark.parametrize("name", list(SAME_BYTES))
def test_encoded_bytes_match_tensorstore(name: str, scratch: Path) -> None:
    data_type, codecs = SAME_BYTES[name]
    doc = array_json(data_type, [9, 13], [4, 6], codecs, zero(data_type))
    model = random_values(data_type, (9, 13), np.random.default_rng(8))
    model[0:2, 0:3] = element(zero(data_type), data_type)[0]  # an empty (inner) chunk
    ours, theirs = str(scratch / "zarrfs"), str(scratch / "tensorstore")
    write_zarrfs(ours, doc, model)
    write_tensorstore(theirs, doc, model)
    keys = stored_keys(theirs)
    assert stored_keys(ours) == keys
    for key in sorted(keys):
        assert _file(ours, key) == _file(theirs, key), f"{key} differs from TensorStore's"


def test_zarrfs_create_refuses_metadata_before_writing(scratch: Path) -> None:
    doc = array_json("uint16", [8, 8], [4, 4], [sharding([3, 4], [bytes_codec()])], 0)
    path = str(scratch / "array")
    with pytest.raises(ValueError, match="chunk_shape"):
        create_array(Store.open(path), metadata_from_json(doc))
    assert not os.path.exists(os.path.join(path, "zarr.json"))
