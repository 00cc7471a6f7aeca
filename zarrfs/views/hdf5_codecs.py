"""Which codec chains HDF5's filters decode as they are, and as which filters: `bytes`, then
numcodecs' byte shuffle of whole elements (HDF5's shuffle, 2: the same transpose of the
elements' bytes), zstd (32015) or a zlib stream (deflate, 1), and at most a `crc32c` after
them (left off the chunk served). Anything else (blosc, gzip's header, a transpose, sub-byte
types, a shuffle of another element size) is decoded by zarrfs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numcodecs

from ..codecs.bytes import BytesCodec
from ..codecs.crc32c import Crc32cCodec
from ..codecs.numcodecs_adapter import NumcodecsBytesCodec
from ..codecs.pipeline import Pipeline
from ..codecs.stored_form import NONE, ZLIB, ZSTD, StoredForm
from ..codecs.zstd import ZstdCodec
from . import hdf5_format as h5

Filters = list[tuple[int, list[int]]]  # (HDF5 filter id, its client values), in write order


@dataclass(frozen=True)
class Filtered:
    """Chunks HDF5 reads as stored: their form (compression, byte order, trailer; its bound
    sizes the slots) and the pipeline of filters that decodes them."""

    form: StoredForm
    filters: Filters


def filtered(pipeline: Pipeline, itemsize: int) -> Filtered | None:
    """How HDF5 decodes the chunks `pipeline` encodes, or None (zarrfs decodes them)."""
    codec = pipeline.array_to_bytes
    if (pipeline.array_codecs or not isinstance(codec, BytesCodec)
            or codec.chunk.data_type.sub_byte_bits is not None):
        return None
    rest = list(pipeline.bytes_codecs)
    shuffle = bool(rest) and _shuffles(rest[0], itemsize)
    rest = rest[1:] if shuffle else rest
    trailer = 4 if rest and isinstance(rest[-1], Crc32cCodec) else 0
    rest = rest[:-1] if trailer else rest
    compression = _compression(rest)
    if compression is None or (compression == NONE and not shuffle):
        return None
    order = codec.stored_dtype
    byteorder = None if order.itemsize == 1 else "big" if order.byteorder == ">" else "little"
    filters: Filters = [(h5.SHUFFLE, [itemsize])] if shuffle else []
    if compression == ZSTD:
        filters.append((h5.ZSTD_FILTER, [3]))
    elif compression == ZLIB:
        filters.append((h5.DEFLATE, [6]))
    return Filtered(StoredForm(compression, byteorder, trailer), filters)


def _shuffles(codec: object, itemsize: int) -> bool:
    """numcodecs' shuffle of the serialized elements' bytes, as HDF5's (whole elements)."""
    return (isinstance(codec, NumcodecsBytesCodec) and isinstance(codec.codec, numcodecs.Shuffle)
            and codec.codec.elementsize == itemsize and itemsize > 1)


def _compression(codecs: Sequence[object]) -> str | None:
    if not codecs:
        return NONE
    if len(codecs) > 1:
        return None
    codec = codecs[0]
    if isinstance(codec, ZstdCodec):
        return ZSTD
    if isinstance(codec, NumcodecsBytesCodec) and isinstance(codec.codec, numcodecs.Zstd):
        return ZSTD
    if isinstance(codec, NumcodecsBytesCodec) and isinstance(codec.codec, numcodecs.Zlib):
        return ZLIB
    return None
