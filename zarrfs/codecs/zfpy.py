"""`numcodecs.zfpy` as zarr-python 3 and zarrs write it: an array->bytes codec over numcodecs'
ZFPY, zfp's stream with zfp's header (unlike the registry's `zfp`, zarrfs.codecs.zfp), for the
types zfpy encodes (int32, int64, float32, float64).

Read as numcodecs reads it: `mode` and that mode's member (`tolerance`, `rate` or `precision`;
the others -1, as numcodecs' own configuration gives them); `compression_kwargs`, which
numcodecs' configuration repeats them in (zarr-python 3.0 wrote it; zarrs reads it), is an
object numcodecs ignores: so does this. Mode 5 (reversible, as zarrs writes it) numcodecs
decodes but cannot encode (it has no arguments for it): zfpy encodes it, as zarrs does, with
none."""

from __future__ import annotations

from typing import Any

import numcodecs
import numpy as np

from ..errors import MetadataError
from ..formats.description import CodecSpec
from .base import ArrayBytesCodec, BytesLike, ChunkSpec, CodecError, check_config_keys

_TYPES = ("int32", "int64", "float32", "float64")
_REVERSIBLE = 5  # (zfp's zfp_mode_reversible)
# What numcodecs' ZFPY and zfpy raise on a bad configuration or bad bytes.
_ERRORS = (RuntimeError, ValueError, TypeError, AttributeError)


class ZfpyCodec(ArrayBytesCodec):
    def __init__(self, chunk: ChunkSpec, codec: numcodecs.ZFPY) -> None:
        self.chunk = chunk
        self.codec = codec

    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: ChunkSpec) -> ZfpyCodec:
        check_config_keys(spec, {"mode", "tolerance", "rate", "precision", "compression_kwargs"})
        if chunk.data_type.name not in _TYPES:
            raise MetadataError(spec.member, f"zfpy does not encode {chunk.data_type.name!r}")
        configuration = dict(spec.configuration)
        if not isinstance(configuration.pop("compression_kwargs", {}), dict):
            raise MetadataError(spec.option("compression_kwargs"), "not an object")
        try:
            codec = cls(chunk, numcodecs.ZFPY(**configuration))
            codec.encode(chunk.fill_array())  # zfpy checks its mode only when it encodes
        except (*_ERRORS, CodecError) as e:
            raise MetadataError(f"{spec.member}.configuration", f"zfpy: {e}") from None
        return codec

    def encode(self, chunk: np.ndarray) -> BytesLike:
        values = np.ascontiguousarray(chunk)
        try:
            if self.codec.mode == _REVERSIBLE:
                return bytes(_zfpy().compress_numpy(values, write_header=True))
            return bytes(self.codec.encode(values))
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


def _zfpy() -> Any:
    import zfpy  # (there when numcodecs.ZFPY is: it is what that is made of)

    return zfpy
