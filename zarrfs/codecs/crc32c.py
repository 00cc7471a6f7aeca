"""The `crc32c` codec: a 4-byte little-endian CRC-32C after the data, computed by
google_crc32c (the package numcodecs uses, called without numcodecs' buffer handling: a
shard's index is checked at each first read of the shard, on the fuse thread for tiles).
Decoding gives the data a buffer of its own, as numcodecs did: a view would keep a whole
request's bytes alive in the cache where nothing after it decodes (`[bytes, crc32c]`)."""

from __future__ import annotations

import numpy as np
from google_crc32c import value as crc32c

from ..formats.description import CodecSpec
from .base import BytesBytesCodec, BytesLike, CodecError, check_config_keys, check_limit

TRAILER = 4


class Crc32cCodec(BytesBytesCodec):
    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: object) -> Crc32cCodec:
        check_config_keys(spec, set())
        return cls()

    def encoded_size(self, decoded_size: int) -> int:
        return decoded_size + TRAILER

    def encode(self, data: BytesLike) -> BytesLike:
        return b"".join((data, crc32c(_array(data)).to_bytes(TRAILER, "little")))

    def decode(self, data: BytesLike, exact_size: int | None, limit: int) -> BytesLike:
        if len(data) < TRAILER:
            raise CodecError(f"crc32c: {len(data)} bytes hold no checksum")
        view = memoryview(data).cast("B")
        payload, stored = view[:-TRAILER], int.from_bytes(view[-TRAILER:], "little")
        computed = crc32c(_array(payload))
        if computed != stored:
            raise CodecError(f"crc32c: the checksum does not match (stored {stored:#010x}, "
                             f"computed {computed:#010x})")
        check_limit(len(payload), exact_size, limit)
        return bytearray(payload)  # (writable, as numcodecs gave it)


def _array(data: BytesLike) -> np.ndarray:
    """`data` as google_crc32c takes it (bytes or an array, not a memoryview), not copied."""
    return np.frombuffer(data, dtype=np.uint8)
