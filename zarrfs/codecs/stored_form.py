"""What a stored chunk's bytes are, for readers that decode them themselves (the TIFF view
hands them out as its tiles untouched): a chunk whose codecs are only `bytes`, at most one
compressor a TIFF reader also knows, and at most a `crc32c` checksum after them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numcodecs
import numpy as np

from .bytes import BytesCodec
from .crc32c import Crc32cCodec
from .numcodecs_adapter import NumcodecsBytesCodec
from .pipeline import Pipeline
from .zstd import ZstdCodec

NONE, ZSTD, ZLIB = "none", "zstd", "zlib"
FRAME_OPTIONS = 32  # (a zstd frame's checksum and dictionary id; a zlib stream's dictionary id)


@dataclass(frozen=True)
class StoredForm:
    compression: str  # NONE, ZSTD or ZLIB (a zlib stream, header and all)
    byteorder: str | None  # the elements' byte order; None for one-byte elements
    trailer: int  # bytes after the compressed data that are not part of it (a checksum)

    def bound(self, size: int) -> int:
        """The most bytes a chunk of `size` bytes encodes to, less its trailer, as the
        compressor's own bound says (ZSTD_compressBound; zlib's deflateBound for any
        settings, with its wrapper), with room for a frame's options (a checksum, an id)."""
        if self.compression == NONE:
            return size
        if self.compression == ZSTD:
            small = ((128 << 10) - size) >> 11 if size < 128 << 10 else 0
            return size + (size >> 8) + small + FRAME_OPTIONS
        return size + ((size + 7) >> 3) + ((size + 63) >> 6) + 5 + 6 + FRAME_OPTIONS


def stored_form(pipeline: Pipeline) -> StoredForm | None:
    """The form of the chunks `pipeline` encodes, or None when it is not that simple."""
    codec = pipeline.array_to_bytes
    if (pipeline.array_codecs or not isinstance(codec, BytesCodec)
            or codec.chunk.data_type.sub_byte_bits is not None):
        return None
    rest = list(pipeline.bytes_codecs)
    trailer = 0
    if rest and isinstance(rest[-1], Crc32cCodec):
        rest.pop()
        trailer = 4
    if len(rest) > 1:
        return None
    compression = NONE if not rest else _compression(rest[0])
    if compression is None:
        return None
    order = codec.stored_dtype.byteorder
    byteorder = None if codec.stored_dtype.itemsize == 1 else ("big" if order == ">" else "little")
    return StoredForm(compression, byteorder, trailer)


def _compression(codec: object) -> str | None:
    if isinstance(codec, ZstdCodec):
        return ZSTD
    if isinstance(codec, NumcodecsBytesCodec) and isinstance(codec.codec, numcodecs.Zlib):
        return ZLIB
    return None


def stored_elements(pipeline: Pipeline) -> np.dtype[Any] | None:
    """The type of a chunk's elements when its stored bytes are the elements as they are, in
    C order (the `bytes` codec alone; not bool, whose bytes are checked as they are decoded):
    readers may take them undecoded. None otherwise."""
    form = stored_form(pipeline)
    codec = pipeline.array_to_bytes
    if (form is None or form.compression != NONE or form.trailer or not isinstance(codec, BytesCodec)
            or codec.chunk.data_type.name == "bool"):
        return None
    return codec.stored_dtype
