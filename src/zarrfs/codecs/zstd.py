"""The `zstd` codec, through numcodecs (byte-identical to TensorStore and zarr-python)."""

from __future__ import annotations

import numpy as np
from numcodecs import Zstd

from ..errors import MetadataError
from ..metadata import CodecSpec
from .base import BytesBytesCodec, BytesLike, CodecError, check_config_keys, config_int

_MAGIC = b"\x28\xb5\x2f\xfd"


class ZstdCodec(BytesBytesCodec):
    def __init__(self, level: int, checksum: bool) -> None:
        self.level = level
        self.checksum = checksum
        self._numcodec = Zstd(level=level, checksum=checksum)

    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: object) -> ZstdCodec:
        check_config_keys(spec, {"level", "checksum"})
        checksum = spec.configuration.get("checksum", False)
        if not isinstance(checksum, bool):
            raise MetadataError(spec.option("checksum"), f"expected true or false, got {checksum!r}")
        return cls(config_int(spec, "level", 0, -131072, 22), checksum)

    def encode(self, data: BytesLike) -> BytesLike:
        return bytes(self._numcodec.encode(data))

    def decode(self, data: BytesLike, exact_size: int | None, limit: int) -> BytesLike:
        declared = frame_content_size(data)
        if exact_size is not None and declared is not None and declared != exact_size:
            raise CodecError(f"zstd frame holds {declared} bytes, expected {exact_size}")
        size = exact_size if exact_size is not None else declared
        if size is None or size > limit:
            raise CodecError(f"zstd frame declares {declared} bytes; the limit is {limit}")
        out = np.empty(size, dtype=np.uint8)
        try:
            decoded = self._numcodec.decode(data, out=out)
        except (RuntimeError, ValueError) as e:
            raise CodecError(f"zstd: {e}") from None
        if decoded is not out:
            raise CodecError("zstd: decoder did not fill the buffer")
        decoded_view: memoryview = out.data
        return decoded_view


def frame_content_size(data: BytesLike) -> int | None:
    """The decoded size a zstd frame header declares, or None when it does not say.

    numcodecs would allocate whatever a frame claims; reading the header first lets a
    decoder refuse a small frame that claims gigabytes."""
    if len(data) < 6 or data[:4] != _MAGIC:
        raise CodecError("zstd: not a zstd frame")
    descriptor = data[4]
    fcs_flag = descriptor >> 6
    single_segment = (descriptor >> 5) & 1
    dict_id_size = (0, 1, 2, 4)[descriptor & 3]
    position = 5 + (0 if single_segment else 1) + dict_id_size
    field_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if field_size == 0:
        return None
    if len(data) < position + field_size:
        raise CodecError("zstd: truncated frame header")
    size = int.from_bytes(data[position : position + field_size], "little")
    return size + 256 if field_size == 2 else size
