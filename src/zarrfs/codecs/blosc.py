"""The `blosc` codec, through numcodecs with the typesize passed explicitly."""

from __future__ import annotations

import numpy as np
from numcodecs import Blosc

from ..metadata import CodecSpec
from .base import (
    BytesBytesCodec,
    BytesLike,
    ChunkSpec,
    CodecError,
    check_config_keys,
    config_choice,
    config_int,
)

_SHUFFLES = {"noshuffle": Blosc.NOSHUFFLE, "shuffle": Blosc.SHUFFLE, "bitshuffle": Blosc.BITSHUFFLE}
_CNAMES = ("blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd")


class BloscCodec(BytesBytesCodec):
    def __init__(self, cname: str, clevel: int, shuffle: str, typesize: int, blocksize: int) -> None:
        self.cname, self.clevel, self.shuffle = cname, clevel, shuffle
        self.typesize, self.blocksize = typesize, blocksize
        self._numcodec = Blosc(
            cname=cname, clevel=clevel, shuffle=_SHUFFLES[shuffle],
            blocksize=blocksize, typesize=typesize,
        )

    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: ChunkSpec) -> BloscCodec:
        check_config_keys(spec, {"cname", "clevel", "shuffle", "typesize", "blocksize"})
        shuffle = config_choice(spec, "shuffle", "noshuffle", tuple(_SHUFFLES))
        # With shuffling the element size matters; TensorStore defaults it to the data type's.
        default_typesize = chunk.data_type.itemsize if shuffle != "noshuffle" else 1
        return cls(
            cname=config_choice(spec, "cname", "lz4", _CNAMES),
            clevel=config_int(spec, "clevel", 5, 0, 9),
            shuffle=shuffle,
            typesize=config_int(spec, "typesize", default_typesize, 1, 255),
            blocksize=config_int(spec, "blocksize", 0, 0, 1 << 31),
        )

    def encode(self, data: BytesLike) -> BytesLike:
        return bytes(self._numcodec.encode(data))

    def decode(self, data: BytesLike, exact_size: int | None, limit: int) -> BytesLike:
        if len(data) < 16:
            raise CodecError("blosc: shorter than a blosc header")
        declared = int.from_bytes(bytes(data[4:8]), "little")
        compressed = int.from_bytes(bytes(data[12:16]), "little")
        if compressed != len(data):
            # c-blosc trusts this field and reads past the buffer when it lies (a segfault).
            raise CodecError(f"blosc header says {compressed} compressed bytes, buffer has {len(data)}")
        if exact_size is not None and declared != exact_size:
            raise CodecError(f"blosc buffer holds {declared} bytes, expected {exact_size}")
        if declared > limit:
            raise CodecError(f"blosc buffer declares {declared} bytes; the limit is {limit}")
        out = np.empty(declared, dtype=np.uint8)
        try:
            self._numcodec.decode(data, out=out)
        except (RuntimeError, ValueError) as e:
            raise CodecError(f"blosc: {e}") from None
        return out.data
