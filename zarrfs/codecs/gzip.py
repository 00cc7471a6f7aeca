"""The `gzip` codec. Encodes with mtime 0, as TensorStore does, so output is reproducible."""

from __future__ import annotations

import gzip
import zlib

from ..formats.description import CodecSpec
from .base import BytesBytesCodec, BytesLike, CodecError, check_config_keys, check_limit, config_int


class GzipCodec(BytesBytesCodec):
    def __init__(self, level: int) -> None:
        self.level = level

    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: object) -> GzipCodec:
        check_config_keys(spec, {"level"})
        return cls(config_int(spec, "level", None, 0, 9))

    def encode(self, data: BytesLike) -> BytesLike:
        return gzip.compress(data, self.level, mtime=0)

    def decode(self, data: BytesLike, exact_size: int | None, limit: int) -> BytesLike:
        inflater = zlib.decompressobj(wbits=47)  # gzip or zlib header, detected
        try:
            out = inflater.decompress(data, limit + 1)
        except zlib.error as e:
            raise CodecError(f"gzip: {e}") from None
        if not inflater.eof and len(out) <= limit:
            raise CodecError("gzip: truncated stream")
        check_limit(len(out), exact_size, limit)
        return out
