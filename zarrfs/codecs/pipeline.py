"""A chain of codecs bound to one chunk spec, validated once when it is built."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..errors import MetadataError
from ..formats.description import CodecSpec
from .base import (
    ArrayArrayCodec,
    ArrayBytesCodec,
    BytesBytesCodec,
    BytesLike,
    ChunkSpec,
    CodecError,
)

Codec = ArrayArrayCodec | ArrayBytesCodec | BytesBytesCodec
CodecFactory = Callable[[CodecSpec, ChunkSpec], Codec]

# Filled by zarrfs.codecs: codec name -> class with a `from_spec(spec, chunk)` constructor.
REGISTRY: dict[str, CodecFactory] = {}


class Pipeline:
    def __init__(
        self,
        chunk: ChunkSpec,
        array_codecs: Sequence[ArrayArrayCodec],
        array_to_bytes: ArrayBytesCodec,
        bytes_codecs: Sequence[BytesBytesCodec],
    ) -> None:
        self.chunk = chunk
        self.array_codecs = tuple(array_codecs)
        self.array_to_bytes = array_to_bytes
        self.bytes_codecs = tuple(bytes_codecs)
        # A limit for intermediate sizes, so no frame can claim unbounded memory.
        self._limit = 2 * chunk.nbytes + (1 << 20)

    @classmethod
    def build(cls, specs: Sequence[CodecSpec], chunk: ChunkSpec) -> Pipeline:
        array_codecs: list[ArrayArrayCodec] = []
        array_to_bytes: ArrayBytesCodec | None = None
        bytes_codecs: list[BytesBytesCodec] = []
        spec_now = chunk
        for spec in specs:
            factory = REGISTRY.get(spec.name) or REGISTRY.get(spec.name.partition(".")[0] + ".")
            if factory is None:
                raise MetadataError(f"{spec.member}.name", f"unknown codec {spec.name!r}")
            codec = factory(spec, spec_now)
            if isinstance(codec, ArrayArrayCodec):
                if array_to_bytes is not None:
                    raise MetadataError(spec.member, f"{spec.name!r} must come before the array->bytes codec")
                array_codecs.append(codec)
                spec_now = codec.output_spec()
            elif isinstance(codec, ArrayBytesCodec):
                if array_to_bytes is not None:
                    raise MetadataError(spec.member, "only one array->bytes codec is allowed")
                array_to_bytes = codec
            else:
                if array_to_bytes is None:
                    raise MetadataError(spec.member, f"{spec.name!r} must come after the array->bytes codec")
                bytes_codecs.append(codec)
        if array_to_bytes is None:
            where = specs[0].member.rsplit("[", 1)[0] if specs else "codecs"
            raise MetadataError(where, "no array->bytes codec (such as 'bytes')")
        return cls(chunk, array_codecs, array_to_bytes, bytes_codecs)

    def encoded_size(self) -> int | None:
        """The exact size of every encoded chunk, when the codecs make it fixed."""
        size = self.array_to_bytes.encoded_size()
        for codec in self.bytes_codecs:
            if size is None:
                return None
            size = codec.encoded_size(size)
        return size

    def encode(self, chunk: np.ndarray) -> BytesLike:
        for array_codec in self.array_codecs:
            chunk = array_codec.encode(chunk)
        data = self.array_to_bytes.encode(chunk)
        assert data is not None
        for bytes_codec in self.bytes_codecs:
            data = bytes_codec.encode(data)
        return data

    def decode(self, data: BytesLike) -> np.ndarray:
        exact = self.array_to_bytes.encoded_size()
        for position, bytes_codec in reversed(list(enumerate(self.bytes_codecs))):
            data = bytes_codec.decode(data, exact if position == 0 else None, self._limit)
        chunk = self.array_to_bytes.decode(data)
        for array_codec in reversed(self.array_codecs):
            chunk = array_codec.decode(chunk)
        if chunk.shape != self.chunk.shape:
            raise CodecError(f"decoded shape {chunk.shape}, expected {self.chunk.shape}")
        return chunk


def is_fill(chunk: np.ndarray, fill_value: bytes) -> bool:
    """Whether every element has exactly the fill value's bits (-0.0 is not 0.0)."""
    itemsize = len(fill_value)
    width = next(w for w in (8, 4, 2, 1) if itemsize % w == 0)  # compare in the widest words
    word = np.dtype(f"u{width}")
    words = np.ascontiguousarray(chunk).reshape(-1).view(word).reshape(-1, itemsize // width)
    fill = np.frombuffer(fill_value, dtype=word)
    # Most chunks differ from the fill at once: the whole comparison makes a mask the size of
    # the chunk, on every chunk stored.
    return bool((words[:1] == fill).all()) and bool((words == fill).all())

