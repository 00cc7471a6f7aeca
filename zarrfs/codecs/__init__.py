"""Codecs by name, and the pipeline that chains them."""

from .base import (
    ArrayArrayCodec,
    ArrayBytesCodec,
    BytesBytesCodec,
    BytesLike,
    ChunkSpec,
    CodecError,
)
from .bytes import BytesCodec
from .crc32c import Crc32cCodec
from .gzip import GzipCodec
from .numcodecs_adapter import registry as numcodecs_registry
from .pipeline import REGISTRY, Pipeline, is_fill
from .sharding import EMPTY, ByteSpan, ShardIndex, ShardingCodec
from .transpose import TransposeCodec

REGISTRY.update(
    {
        "bytes": BytesCodec.from_spec,
        "transpose": TransposeCodec.from_spec,
        "sharding_indexed": ShardingCodec.from_spec,
        "gzip": GzipCodec.from_spec,
        "crc32c": Crc32cCodec.from_spec,
        **numcodecs_registry(),
    }
)

__all__ = [
    "EMPTY",
    "ArrayArrayCodec",
    "ArrayBytesCodec",
    "ByteSpan",
    "BytesBytesCodec",
    "BytesLike",
    "ChunkSpec",
    "CodecError",
    "Pipeline",
    "ShardIndex",
    "ShardingCodec",
    "is_fill",
]
