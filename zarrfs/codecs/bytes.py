"""The `bytes` codec: a chunk's elements in C order with a chosen byte order.

Two kinds of element need care: the sub-byte integers (int2, int4, uint2, uint4) are stored
one per byte, the value in the low bits (TensorStore's layout; the registry says the high bits
are ignored on read), and bool bytes other than 0 and 1 are corrupt (TensorStore refuses them
too). 1-byte floats and complex types of 1-byte parts have no byte order to choose.
"""

from __future__ import annotations

import numpy as np

from ..formats.description import CodecSpec
from ..formats.dtypes import from_low_bits
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

    def __reduce__(self) -> tuple[type[BytesCodec], tuple[ChunkSpec, str | None]]:
        """Made again from its spec in another process (a decoding process): a pickled stored
        type of another package arrives in the machine's byte order (ml_dtypes' big-endian
        bfloat16 would be decoded unswapped)."""
        return type(self), (self.chunk, self.endian)

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
        bits = self.chunk.data_type.sub_byte_bits
        if bits is not None:
            return (chunk.view(np.uint8) & np.uint8((1 << bits) - 1)).tobytes()
        # A view of the elements when they are stored as they lie, not a copy: the encoders
        # after this one read it at once, and a chunk stored uncompressed is written from it
        # (the write-back's chunks are lent to it, so a write meanwhile copies them first).
        # The copy cost a whole-array write of zstd chunks a tenth of the daemon's interpreter
        # lock, held through it.
        return np.ascontiguousarray(chunk, dtype=self.stored_dtype).reshape(-1).view(np.uint8).data

    def decode(self, data: BytesLike) -> np.ndarray:
        if len(data) != self.chunk.nbytes:
            raise CodecError(f"holds {len(data)} bytes, a chunk needs {self.chunk.nbytes}")
        stored = np.frombuffer(data, dtype=self.stored_dtype).reshape(self.chunk.shape)
        if self.chunk.data_type.sub_byte_bits is not None:
            return from_low_bits(stored, self.chunk.data_type)
        if self.chunk.data_type.name == "bool" and stored.view(np.uint8).max(initial=0) > 1:
            raise CodecError("bool chunk holds bytes other than 0 and 1")
        if self.stored_dtype.isnative:
            return stored
        return stored.astype(self.chunk.data_type.storage)

