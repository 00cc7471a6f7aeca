"""`numcodecs.zfpy` as zarr-python 3 writes it: an array->bytes codec over numcodecs' ZFPY,
zfp's stream with zfp's header (unlike the registry's `zfp`, zarrfs.codecs.zfp), for the
types zfpy encodes (int32, int64, float32, float64)."""

from __future__ import annotations

import numcodecs
import numpy as np

from ..errors import MetadataError
from ..formats.description import CodecSpec
from .base import ArrayBytesCodec, BytesLike, ChunkSpec, CodecError, check_config_keys

_TYPES = ("int32", "int64", "float32", "float64")
# What numcodecs' ZFPY and zfpy raise on a bad configuration or bad bytes.
_ERRORS = (RuntimeError, ValueError, TypeError, AttributeError)


class ZfpyCodec(ArrayBytesCodec):
    def __init__(self, chunk: ChunkSpec, codec: numcodecs.ZFPY) -> None:
        self.chunk = chunk
        self.codec = codec

    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: ChunkSpec) -> ZfpyCodec:
        check_config_keys(spec, {"mode", "tolerance", "rate", "precision"})
        if chunk.data_type.name not in _TYPES:
            raise MetadataError(spec.member, f"zfpy does not encode {chunk.data_type.name!r}")
        try:
            codec = cls(chunk, numcodecs.ZFPY(**spec.configuration))
            codec.encode(chunk.fill_array())  # zfpy checks its mode only when it encodes
        except (*_ERRORS, CodecError) as e:
            raise MetadataError(f"{spec.member}.configuration", f"zfpy: {e}") from None
        return codec

    def encode(self, chunk: np.ndarray) -> BytesLike:
        try:
            return bytes(self.codec.encode(np.ascontiguousarray(chunk)))
        except _ERRORS as e:
            raise CodecError(f"zfpy: cannot encode: {e}") from None

    def decode(self, data: BytesLike) -> np.ndarray:
        try:
            values = np.asarray(self.codec.decode(bytes(data)))
        except _ERRORS as e:
            raise CodecError(f"zfpy: {e}") from None
        if values.dtype != self.chunk.data_type.storage or values.size != np.prod(self.chunk.shape):
            raise CodecError(f"zfpy: decoded {values.size} {values.dtype}, a chunk is {self.chunk.shape} "
                             f"{self.chunk.data_type.name}")
        return values.reshape(self.chunk.shape)
