"""Decoding chunks of variable-size elements (strings, bytes): the bytes->bytes codecs of the
chain in reverse, then numcodecs' `VLenUTF8`/`VLenBytes` (the registry's `vlen-utf8` and
`vlen-bytes`: a count, then each element's length and bytes) into an object array of the
chunk's shape. Read only: zarrfs does not write such arrays."""

from __future__ import annotations

from collections.abc import Sequence

import numcodecs
import numpy as np

from ..errors import MetadataError
from ..formats.description import MAX_CHUNK_BYTES, CodecSpec
from ..formats.dtypes import CORE_TYPES
from .base import BytesBytesCodec, BytesLike, ChunkSpec, CodecError
from .pipeline import REGISTRY

_VLEN = {"vlen-utf8": numcodecs.VLenUTF8, "vlen-bytes": numcodecs.VLenBytes}


class VlenDecoder:
    def __init__(self, specs: Sequence[CodecSpec], shape: tuple[int, ...]) -> None:
        """`specs`: the vlen codec, then bytes->bytes codecs; `shape`: the (largest) chunk's."""
        first = specs[0]
        if first.name not in _VLEN:
            raise MetadataError(f"{first.member}.name", f"expected vlen-utf8 or vlen-bytes: {first.name!r}")
        self.vlen = _VLEN[first.name]()
        # (The bytes codecs see the serialized chunk as bytes: a one-byte stand-in type.)
        spec = ChunkSpec(shape, CORE_TYPES["uint8"], b"\0")
        self.bytes_codecs: list[BytesBytesCodec] = []
        for codec_spec in specs[1:]:
            factory = REGISTRY.get(codec_spec.name) or REGISTRY.get(codec_spec.name.partition(".")[0] + ".")
            codec = None if factory is None else factory(codec_spec, spec)
            if not isinstance(codec, BytesBytesCodec):
                raise MetadataError(f"{codec_spec.member}.name",
                                    f"{codec_spec.name!r} cannot follow {first.name} (only bytes codecs can)")
            self.bytes_codecs.append(codec)

    def decode(self, data: BytesLike, shape: tuple[int, ...], order: str = "C") -> np.ndarray:
        """A stored chunk as an object array of str (or bytes) of `shape` (the chunk's), its
        elements stored in `order` (C, or v2's F)."""
        for codec in reversed(self.bytes_codecs):
            data = codec.decode(data, None, MAX_CHUNK_BYTES)
        try:
            flat: np.ndarray = self.vlen.decode(bytes(data))
        except (ValueError, RuntimeError, TypeError, UnicodeDecodeError) as e:
            raise CodecError(f"not a {type(self.vlen).__name__} chunk: {e}") from None
        if flat.size != int(np.prod(shape)):
            raise CodecError(f"{flat.size} elements, expected {int(np.prod(shape))}")
        return flat.reshape(shape, order="F" if order == "F" else "C")
