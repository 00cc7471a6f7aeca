"""The `crc32c` codec: a 4-byte little-endian CRC-32C after the data, through numcodecs."""

from __future__ import annotations

from numcodecs import CRC32C

from ..formats.description import CodecSpec
from .base import BytesBytesCodec, BytesLike, CodecError, check_config_keys, check_limit

_NUMCODEC = CRC32C()


class Crc32cCodec(BytesBytesCodec):
    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: object) -> Crc32cCodec:
        check_config_keys(spec, set())
        return cls()

    def encoded_size(self, decoded_size: int) -> int:
        return decoded_size + 4

    def encode(self, data: BytesLike) -> BytesLike:
        return bytes(_NUMCODEC.encode(data))

    def decode(self, data: BytesLike, exact_size: int | None, limit: int) -> BytesLike:
        try:
            decoded = _NUMCODEC.decode(data)
        except (RuntimeError, ValueError) as e:
            raise CodecError(f"crc32c: {e}") from None
        check_limit(len(decoded), exact_size, limit)
        return memoryview(decoded).cast("B")
