"""Arrays created the way users create them, through TensorStore's schema and zarr-python's
`create_array`, so the metadata is exactly what each library writes on its own (defaults,
`storage_transformers: []`, Morton-ordered shards, normalised JSON). zarrfs must read them bit
for bit as the library itself does."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import tensorstore as ts
import zarr
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    ShardingCodec,
    TransposeCodec,
    ZstdCodec,
)

from tests.helpers.interop_cases import zero
from tests.helpers.interop_docs import array_json, bytes_codec
from tests.helpers.interop_io import read_tensorstore, read_zarr_python, sub_boxes
from tests.helpers.interop_model import stored_keys
from tests.helpers.interop_values import assert_same_bits, random_values
from zarrfs.array_metadata import open_array
from zarrfs.errors import ChunkError
from zarrfs.grid import Box
from zarrfs.store import Store

pytestmark = pytest.mark.fast


def _fill_some(shape: tuple[int, ...], data_type: str) -> tuple[tuple[slice, ...], np.ndarray]:
    """Values for the second half of an array along axis 0 (the first half stays unwritten)."""
    half = tuple([slice(shape[0] // 2, shape[0]), *[slice(None)] * (len(shape) - 1)])
    region_shape = (shape[0] - shape[0] // 2, *shape[1:])
    return half, random_values(data_type, region_shape, np.random.default_rng(sum(shape)))


def _zarr_python(**kwargs: Any) -> Callable[[str], None]:
    def create(path: str) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            array = zarr.create_array(store=path, **kwargs)
            where, values = _fill_some(array.shape, kwargs["dtype"])
            array[where] = values

    return create


def _zarr_python_codecs(shape: tuple[int, ...], dtype: str, chunks: tuple[int, ...],
                        codecs: list[Any], fill: Any = 0) -> Callable[[str], None]:
    def create(path: str) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            array = zarr.create(shape=shape, chunks=chunks, dtype=dtype, codecs=codecs,
                                fill_value=fill, zarr_format=3, store=path)
            where, values = _fill_some(array.shape, dtype)
            array[where] = values

    return create


def _tensorstore(dtype: str, schema: dict[str, Any], *, int4_via_int8: bool = True) -> Callable[
    [str], None
]:
    def create(path: str) -> None:
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": path}, "dtype": dtype,
                "schema": schema}
        array = ts.open(spec, create=True).result()
        where, values = _fill_some(tuple(array.shape), dtype)
        if dtype == "int4" and int4_via_int8:
            ts.cast(array, ts.int8)[where] = values  # stored sign-extended: high nibble 0xf
        elif dtype == "int4":
            array[where] = values.astype(ml_dtypes.int4)  # stored with high nibble 0
        else:
            array[where] = values

    return create


NATIVE: dict[str, tuple[str, Callable[[str], None]]] = {
    "zarr-python-defaults": ("zarr-python", _zarr_python(
        shape=(9, 13), chunks=(2, 3), dtype="float32")),
    "zarr-python-sharded-nan-fill": ("zarr-python", _zarr_python(
        shape=(9, 13), chunks=(2, 3), shards=(4, 6), dtype="float32", fill_value=np.nan,
        dimension_names=("y", "x"))),
    "zarr-python-sharded-many-inner-chunks": ("zarr-python", _zarr_python(
        shape=(33, 17), chunks=(2, 2), shards=(16, 8), dtype="uint16", fill_value=3)),
    "zarr-python-transpose-big-endian-blosc-v2-key": ("zarr-python", _zarr_python(
        shape=(9, 13), chunks=(2, 3), dtype="int16", filters=[TransposeCodec(order=(1, 0))],
        serializer=BytesCodec(endian="big"),
        compressors=[BloscCodec(cname="zstd", clevel=3, shuffle="bitshuffle")],
        chunk_key_encoding={"name": "v2", "separator": "."})),
    "zarr-python-gzip-crc32c-dot-key": ("zarr-python", _zarr_python(
        shape=(4, 5, 6), chunks=(3, 2, 4), dtype="complex128",
        compressors=[GzipCodec(level=4), Crc32cCodec()],
        chunk_key_encoding={"name": "default", "separator": "."})),
    "zarr-python-bool-no-compressor": ("zarr-python", _zarr_python(
        shape=(7, 7), chunks=(3, 3), dtype="bool", compressors=None, fill_value=True)),
    "zarr-python-uint64-blosc-lz4": ("zarr-python", _zarr_python(
        shape=(20,), chunks=(6,), dtype="uint64",
        compressors=[BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")])),
    "zarr-python-sharding-index-start": ("zarr-python", _zarr_python_codecs(
        (9, 13), "int32", (4, 6),
        [ShardingCodec(chunk_shape=(2, 3), codecs=[BytesCodec(), ZstdCodec(level=1)],
                       index_location="start")], fill=-1)),
    "zarr-python-nested-sharding": ("zarr-python", _zarr_python_codecs(
        (16, 16), "float64", (8, 8),
        [ShardingCodec(chunk_shape=(4, 4),
                       codecs=[ShardingCodec(chunk_shape=(2, 2), codecs=[BytesCodec()])])])),
    "tensorstore-sharded-zstd": ("tensorstore", _tensorstore("uint16", {
        "domain": {"shape": [30, 40]},
        "chunk_layout": {"read_chunk": {"shape": [5, 10]}, "write_chunk": {"shape": [10, 20]}},
        "codec": {"driver": "zarr3", "codecs": [{"name": "zstd", "configuration": {"level": 2}}]},
        "fill_value": 7})),
    "tensorstore-labels-default-codecs": ("tensorstore", _tensorstore("float64", {
        "domain": {"shape": [30, 40], "labels": ["a", "b"]},
        "chunk_layout": {"chunk": {"shape": [7, 9]}}})),
    "tensorstore-int4-gzip": ("tensorstore", _tensorstore("int4", {
        "domain": {"shape": [11, 6]}, "chunk_layout": {"chunk": {"shape": [4, 4]}},
        "codec": {"driver": "zarr3", "codecs": [{"name": "gzip", "configuration": {"level": 5}}]},
        "fill_value": -2})),
    "tensorstore-int4-from-ml-dtypes": ("tensorstore", _tensorstore("int4", {
        "domain": {"shape": [11, 6]}, "chunk_layout": {"chunk": {"shape": [4, 4]}},
        "fill_value": 5}, int4_via_int8=False)),
    "tensorstore-bfloat16-sharded-index-start": ("tensorstore", _tensorstore("bfloat16", {
        "domain": {"shape": [12, 12]},
        "chunk_layout": {"read_chunk": {"shape": [3, 4]}, "write_chunk": {"shape": [6, 12]}},
        "codec": {"driver": "zarr3", "codecs": [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [3, 4], "index_location": "start",
            "codecs": [{"name": "bytes", "configuration": {"endian": "big"}},
                       {"name": "blosc", "configuration": {
                           "cname": "zstd", "clevel": 5, "shuffle": "bitshuffle",
                           "typesize": 2}}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                             {"name": "crc32c"}]}}]},
        "fill_value": "NaN"})),
    "tensorstore-rank3-transpose": ("tensorstore", _tensorstore("complex64", {
        "domain": {"shape": [5, 6, 7]}, "chunk_layout": {"chunk": {"shape": [2, 4, 3]}},
        "codec": {"driver": "zarr3", "codecs": [
            {"name": "transpose", "configuration": {"order": [2, 0, 1]}},
            {"name": "bytes", "configuration": {"endian": "little"}}]}})),
}


@pytest.mark.parametrize("name", list(NATIVE))
def test_zarrfs_reads_natively_created_array(name: str, scratch: Path) -> None:
    writer, create = NATIVE[name]
    path = str(scratch / "array")
    create(path)
    written, fill = (read_tensorstore if writer == "tensorstore" else read_zarr_python)(path)
    if not name.startswith(("tensorstore-int4", "tensorstore-bfloat16")):
        other, _ = (read_zarr_python if writer == "tensorstore" else read_tensorstore)(path)
        assert_same_bits(other, written, "TensorStore vs zarr-python")

    array = open_array(Store.open(path, read_only=True), threads=2, cache_bytes=1 << 14)
    try:
        assert array.metadata.fill_value == fill.tobytes()
        whole = Box((0,) * len(array.shape), array.shape)
        assert_same_bits(array.read(whole), written, f"zarrfs reading {name}")
        for box in sub_boxes(array.shape, np.random.default_rng(7), 8):
            assert_same_bits(array.read(box), written[box.slices()], f"zarrfs reading {box}")
        keys = stored_keys(path)
        assert keys, "the writer stored no chunk"
        assert array.stored_chunk_count() == len(keys)
    finally:
        array.close()


def _raw_array(path: str, data_type: str, chunk: bytes) -> None:
    """A 2 x 3 array whose one chunk holds exactly `chunk`."""
    doc = array_json(data_type, [2, 3], [2, 3], [bytes_codec(None)], zero(data_type))
    os.makedirs(os.path.join(path, "c", "0"))
    with open(os.path.join(path, "zarr.json"), "w") as f:
        json.dump(doc, f)
    with open(os.path.join(path, "c", "0", "0"), "wb") as f:
        f.write(chunk)


def test_int4_high_nibble_is_ignored(scratch: Path) -> None:
    path = str(scratch / "array")
    _raw_array(path, "int4", bytes([0x03, 0xA3, 0xF9, 0x09, 0x5F, 0x70]))
    expected = np.array([[3, 3, -7], [-7, -1, 0]], dtype=np.int8)
    seen, _ = read_tensorstore(path)
    assert_same_bits(seen, expected, "TensorStore")
    array = open_array(Store.open(path, read_only=True), threads=1)
    try:
        assert_same_bits(array.read(Box((0, 0), (2, 3))), expected, "zarrfs")
    finally:
        array.close()


def test_bool_bytes_other_than_0_and_1_are_corrupt(scratch: Path) -> None:
    path = str(scratch / "array")
    _raw_array(path, "bool", bytes([0, 1, 2, 1, 0, 0]))
    with pytest.raises(ValueError, match="Invalid bool value"):
        read_tensorstore(path)
    array = open_array(Store.open(path, read_only=True), threads=1)
    try:
        with pytest.raises(ChunkError) as raised:
            array.read(Box((0, 0), (2, 3)))
        assert raised.value.key == "c/0/0"
    finally:
        array.close()
