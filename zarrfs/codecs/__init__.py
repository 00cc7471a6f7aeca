"""Codecs by name, and the pipeline that chains them."""

from ..formats.description import CodecSpec
from .base import (
    ArrayArrayCodec,
    ArrayBytesCodec,
    BytesBytesCodec,
    BytesLike,
    ChunkSpec,
    CodecError,
)
from .bitround import BitroundCodec
from .bytes import BytesCodec
from .cast_value import CastValueCodec
from .crc32c import Crc32cCodec
from .elements import SentType, place, received, sent
from .gdeflate import GDeflateCodec
from .gzip import GzipCodec
from .numcodecs_adapter import NAMES as NUMCODECS_NAMES
from .numcodecs_adapter import from_spec as numcodecs_from_spec
from .numcodecs_adapter import one_thread_each
from .packbits import PackBitsCodec
from .pcodec import PcodecCodec
from .pipeline import REGISTRY, Pipeline, is_fill
from .reshape import ReshapeCodec
from .scale_offset import ScaleOffsetCodec
from .sharding import EMPTY, ByteSpan, ShardIndex, ShardingCodec
from .transpose import TransposeCodec
from .zfp import ZfpCodec
from .zfpy import ZfpyCodec
from .zstd import ZstdCodec


def _from_numcodecs(spec: CodecSpec, chunk: ChunkSpec) -> ArrayArrayCodec | BytesBytesCodec:
    return ZstdCodec.in_place_of(numcodecs_from_spec(spec, chunk))


REGISTRY.update(
    {
        "bytes": BytesCodec.from_spec,
        "transpose": TransposeCodec.from_spec,
        "sharding_indexed": ShardingCodec.from_spec,
        "gzip": GzipCodec.from_spec,
        "crc32c": Crc32cCodec.from_spec,
        **dict.fromkeys(NUMCODECS_NAMES, _from_numcodecs),
        "bitround": BitroundCodec.from_spec,
        "packbits": PackBitsCodec.from_spec,
        "reshape": ReshapeCodec.from_spec,
        "zarrs.squeeze": ReshapeCodec.squeeze,
        "zfp": ZfpCodec.from_spec,
        "numcodecs.pcodec": PcodecCodec.from_spec,
        "cast_value": CastValueCodec.from_spec,
        "scale_offset": ScaleOffsetCodec.from_spec,
        "zarrs.gdeflate": GDeflateCodec.from_spec,
        "numcodecs.zfpy": ZfpyCodec.from_spec,
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
    "SentType",
    "ShardIndex",
    "ShardingCodec",
    "is_fill",
    "one_thread_each",
    "place",
    "received",
    "sent",
]
