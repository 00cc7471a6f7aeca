"""Fuzz target: shards. The first byte picks a sharding codec (index at the start or the end,
with or without crc32c, inner chunks raw, compressed or sharded again); the rest is a stored
shard. Its index is decoded as the array layer decodes it (size known, and unknown as when
only the index was fetched), every inner chunk it lists is cut out and decoded, and the whole
shard is decoded as an ordinary array->bytes codec."""

from __future__ import annotations

from typing import Any

import numpy as np

from zarrfs.codecs import ChunkSpec, Pipeline, ShardingCodec
from zarrfs.formats.dtypes import CORE_TYPES
from zarrfs.formats.v3 import parse_codec_list

from .common import expect_typed, split

BYTES: dict[str, Any] = {"name": "bytes", "configuration": {"endian": "little"}}
CRC: dict[str, Any] = {"name": "crc32c"}


def sharding(inner_shape: list[int], codecs: list[Any], index_codecs: list[Any],
             location: str) -> dict[str, Any]:
    return {"name": "sharding_indexed", "configuration": {
        "chunk_shape": inner_shape, "codecs": codecs, "index_codecs": index_codecs,
        "index_location": location}}


# (name, data type, shard shape, the sharding codec)
CONFIGS: list[tuple[str, str, tuple[int, ...], dict[str, Any]]] = [
    ("end-crc", "uint16", (4, 6), sharding([2, 3], [BYTES], [BYTES, CRC], "end")),
    ("start-crc", "uint16", (4, 6), sharding([2, 3], [BYTES], [BYTES, CRC], "start")),
    ("end-plain", "uint8", (8,), sharding([2], [{"name": "bytes"}], [BYTES], "end")),
    ("start-plain", "int32", (3, 3), sharding([1, 3], [BYTES], [BYTES], "start")),
    ("gzip", "float32", (4, 4), sharding([2, 2], [BYTES, {"name": "gzip", "configuration": {"level": 1}}],
                                         [BYTES, CRC], "end")),
    ("zstd", "int64", (6,), sharding([3], [BYTES, {"name": "zstd", "configuration": {"level": 1}}],
                                     [BYTES], "end")),
    ("nested", "uint8", (4, 4), sharding([2, 4], [sharding([1, 2], [{"name": "bytes"}], [BYTES], "end")],
                                         [BYTES, CRC], "start")),
]


def build(dtype: str, shape: tuple[int, ...], config: dict[str, Any]) -> ShardingCodec:
    data_type = CORE_TYPES[dtype]
    pipeline = Pipeline.build(parse_codec_list([config], "codecs"),
                              ChunkSpec(shape, data_type, bytes(data_type.itemsize)))
    codec = pipeline.array_to_bytes
    assert isinstance(codec, ShardingCodec)
    return codec


CODECS = {name: build(dtype, shape, config) for name, dtype, shape, config in CONFIGS}
NAMES = tuple(CODECS)


def sample(name: str) -> np.ndarray:
    """A shard of values for the seeds, some inner chunks left all fill (not stored)."""
    spec = CODECS[name].chunk
    values = (np.arange(int(np.prod(spec.shape))) % 5).reshape(spec.shape)
    values.reshape(-1)[: values.size // 3] = 0
    return values.astype(spec.data_type.storage)


def inner_chunks(codec: ShardingCodec, shard: bytes) -> None:
    """The index located and decoded as the array layer does, then each inner chunk decoded."""
    span = codec.index_span(len(shard))
    view = memoryview(shard)
    index = codec.decode_index(view[span.offset : span.end], len(shard))
    for inner in codec.inner_positions():
        where = index.span(inner)
        if where is not None:
            expect_typed(lambda w=where: codec.decode_inner(view[w.offset : w.end]))


def fuzz_one(data: bytes) -> None:
    name, shard = split(data, NAMES)
    codec = CODECS[name]
    if len(shard) >= codec.index_nbytes:
        expect_typed(lambda: inner_chunks(codec, shard))
        # Only the index fetched (a ranged read), the shard's size not known.
        head = shard[: codec.index_nbytes] if codec.index_at_start else shard[-codec.index_nbytes :]
        expect_typed(lambda: codec.decode_index(head, None))
    expect_typed(lambda: codec.decode(shard))
