"""The `bytes` codec: a chunk's elements in C order with a chosen byte order.

Two element types need care: int4 is stored one per byte, the value in the low nibble
(TensorStore's layout; the high nibble is ignored on read), and bool bytes other than 0 and 1
are corrupt (TensorStore refuses them too).
"""

from __future__ import annotations

import numpy as np

from ..formats.description import CodecSpec
from .base import (
    ArrayBytesCodec,
    BytesLike,
    ChunkSpec,
    CodecError,
    check_config_keys,
    config_choice,
)


class BytesCodec(ArrayBytesCodec):
    def __init__(self, chunk: ChunkSpec, endian: str | None) -> None:
        self.chunk = chunk
        self.endian = endian
        stored = chunk.data_type.stored
        if endian is None and stored is not None:
            self.stored_dtype = stored  # v2 and v1: the dtype's own byte order, per field
        else:
            self.stored_dtype = chunk.data_type.storage.newbyteorder(">" if endian == "big" else "<")

    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: ChunkSpec) -> BytesCodec:
        check_config_keys(spec, {"endian"})
        if "endian" not in spec.configuration:
            # Required for multi-byte types by the spec; zarr-python then assumes the
            # machine's order, which on every platform we run on is little.
            single = chunk.data_type.itemsize == 1 or chunk.data_type.stored is not None
            return cls(chunk, None if single else "little")
        return cls(chunk, config_choice(spec, "endian", None, ("little", "big")))

    def to_json(self) -> dict[str, object]:
        if self.endian is None:
            return {"name": "bytes"}
        return {"name": "bytes", "configuration": {"endian": self.endian}}

    def encoded_size(self) -> int:
        return self.chunk.nbytes

    def encode(self, chunk: np.ndarray) -> BytesLike:
        if self.chunk.data_type.name == "int4":
            return (chunk.view(np.uint8) & 0x0F).tobytes()
        return np.ascontiguousarray(chunk, dtype=self.stored_dtype).tobytes()

    def decode(self, data: BytesLike) -> np.ndarray:
        if len(data) != self.chunk.nbytes:
            raise CodecError(f"holds {len(data)} bytes, a chunk needs {self.chunk.nbytes}")
        stored = np.frombuffer(data, dtype=self.stored_dtype).reshape(self.chunk.shape)
        name = self.chunk.data_type.name
        if name == "int4":
            nibbles = stored.view(np.uint8) & 0x0F
            return (nibbles ^ 8).astype(np.int8) - np.int8(8)
        if name == "bool" and stored.view(np.uint8).max(initial=0) > 1:
            raise CodecError("bool chunk holds bytes other than 0 and 1")
        if self.stored_dtype.isnative:
            return stored
        return stored.astype(self.chunk.data_type.storage)

