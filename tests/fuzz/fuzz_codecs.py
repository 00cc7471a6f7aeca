"""Fuzz target: every codec's decode. The first byte picks a chain (zarrfs's own codecs:
bytes, transpose, gzip, zstd, crc32c, sharding; and through the numcodecs adapter every codec
its registry serves, as v3 `numcodecs.*`, v2/v1 buffer codecs and v3's blosc); the rest is the
stored chunk, decoded by the chain's pipeline."""

from __future__ import annotations

from typing import Any

import numpy as np

from zarrfs.codecs import ChunkSpec, Pipeline
from zarrfs.formats import CodecSpec
from zarrfs.formats.dtypes import CORE_TYPES
from zarrfs.formats.v2 import buffer_codec, parse_dtype
from zarrfs.formats.v3 import parse_codec_list

from .common import expect_typed, split

BYTES: dict[str, Any] = {"name": "bytes", "configuration": {"endian": "little"}}
SHAPE = (6, 5)


def v3(*codecs: Any) -> list[Any]:
    return [BYTES, *codecs]


def v2(*codecs: dict[str, Any]) -> list[Any]:
    """A v2 chain: serialized bytes, then filters and compressor run on them."""
    return [{"name": "bytes"}, *codecs]


def _sharding(inner: list[Any], location: str = "end") -> dict[str, Any]:
    return {"name": "sharding_indexed", "configuration": {
        "chunk_shape": [3, 5], "codecs": inner, "index_codecs": [BYTES, {"name": "crc32c"}],
        "index_location": location}}


# (name, data type: a v3 name or a v2 typestr, codecs)
CHAINS: list[tuple[str, str, list[Any]]] = [
    ("bytes", "int16", v3()),
    ("bytes-big", "float32", [{"name": "bytes", "configuration": {"endian": "big"}}]),
    ("bytes-bool", "bool", [{"name": "bytes"}]),
    ("bytes-int4", "int4", [{"name": "bytes"}]),
    ("transpose", "uint16", [{"name": "transpose", "configuration": {"order": [1, 0]}}, BYTES]),
    ("gzip", "int32", v3({"name": "gzip", "configuration": {"level": 5}})),
    ("zstd", "int32", v3({"name": "zstd", "configuration": {"level": 3, "checksum": True}})),
    ("crc32c", "int32", v3({"name": "crc32c"})),
    ("crc32c-zstd", "int32", v3({"name": "crc32c"}, {"name": "zstd", "configuration": {"level": 1}})),
    ("blosc", "float64", v3({"name": "blosc", "configuration": {
        "cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 8, "blocksize": 0}})),
    ("blosc-zstd-bitshuffle", "uint16", v3({"name": "blosc", "configuration": {
        "cname": "zstd", "clevel": 3, "shuffle": "bitshuffle", "typesize": 2, "blocksize": 0}})),
    ("sharding", "int32", [_sharding(v3({"name": "gzip", "configuration": {"level": 1}}))]),
    ("sharding-start", "uint8", [_sharding([{"name": "bytes"}], "start")]),
    ("numcodecs.lz4", "int32", v3({"name": "numcodecs.lz4"})),
    ("numcodecs.zlib", "int32", v3({"name": "numcodecs.zlib", "configuration": {"level": 1}})),
    ("numcodecs.bz2", "int32", v3({"name": "numcodecs.bz2", "configuration": {"level": 1}})),
    ("numcodecs.lzma", "int32", v3({"name": "numcodecs.lzma"})),
    ("numcodecs.shuffle", "int32", v3({"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}})),
    ("numcodecs.fletcher32", "int32", v3({"name": "numcodecs.fletcher32"})),
    ("numcodecs.adler32", "int32", v3({"name": "numcodecs.adler32"})),
    ("numcodecs.crc32", "int32", v3({"name": "numcodecs.crc32"})),
    ("numcodecs.jenkins_lookup3", "int32", v3({"name": "numcodecs.jenkins_lookup3"})),
    ("numcodecs.delta", "int32", [{"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}}, BYTES]),
    ("numcodecs.packbits", "bool", [{"name": "numcodecs.packbits"}, {"name": "bytes"}]),
    ("numcodecs.fixedscaleoffset", "float64", [{"name": "numcodecs.fixedscaleoffset", "configuration": {
        "offset": 1, "scale": 10, "dtype": "<f8", "astype": "<i2"}}, BYTES]),
    ("numcodecs.astype", "float64", [{"name": "numcodecs.astype", "configuration": {
        "encode_dtype": "<f4", "decode_dtype": "<f8"}}, BYTES]),
    ("v2-blosc", "<i4", v2({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0})),
    ("v2-zstd", "<i4", v2({"id": "zstd", "level": 1})),
    ("v2-gzip", "<i4", v2({"id": "gzip", "level": 1})),
    ("v2-zlib", "<i4", v2({"id": "zlib", "level": 1})),
    ("v2-lz4", "<i4", v2({"id": "lz4", "acceleration": 1})),
    ("v2-bz2", "<i4", v2({"id": "bz2", "level": 1})),
    ("v2-lzma", "<i4", v2({"id": "lzma"})),
    ("v2-crc32c", "<i4", v2({"id": "crc32c"})),
    ("v2-delta-zlib", "<i8", v2({"id": "delta", "dtype": "<i8"}, {"id": "zlib", "level": 1})),
    ("v2-shuffle-zstd", ">f8", v2({"id": "shuffle", "elementsize": 8}, {"id": "zstd", "level": 1})),
    ("v2-quantize", "<f8", v2({"id": "quantize", "digits": 3, "dtype": "<f8"})),
    ("v2-categorize", "<U3", v2({"id": "categorize", "labels": ["a", "bb"], "dtype": "<U3",
                                 "astype": "u1"})),
    ("v2-bitround", "<f4", v2({"id": "bitround", "keepbits": 5})),
    ("v2-pcodec", "<f8", v2({"id": "pcodec", "level": 3})),
]


def _spec(item: Any, where: str) -> CodecSpec:
    if "id" in item:
        return buffer_codec(item, where)
    return parse_codec_list([item], where)[0]


def build(dtype_name: str, codecs: list[Any]) -> Pipeline:
    data_type = CORE_TYPES[dtype_name] if dtype_name in CORE_TYPES else parse_dtype(dtype_name)
    specs = [_spec(item, f"codecs[{i}]") for i, item in enumerate(codecs)]
    return Pipeline.build(specs, ChunkSpec(SHAPE, data_type, bytes(data_type.itemsize)))


PIPELINES = {name: build(dtype, codecs) for name, dtype, codecs in CHAINS}
NAMES = tuple(PIPELINES)


def sample(name: str) -> np.ndarray:
    """A chunk of varied values for the seeds (bool, int4 and text kept in their range)."""
    spec = PIPELINES[name].chunk
    values = np.arange(np.prod(SHAPE)).reshape(SHAPE) % 3
    if spec.data_type.kind == "string":
        return np.array(["a", "bb", "a"] * 10, dtype=spec.data_type.storage).reshape(SHAPE)
    return values.astype(spec.data_type.storage)


def fuzz_one(data: bytes) -> None:
    name, payload = split(data, NAMES)
    expect_typed(lambda: PIPELINES[name].decode(payload))
