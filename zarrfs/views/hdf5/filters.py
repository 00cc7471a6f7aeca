"""Which codec chains HDF5's filters decode as they are, and as which filters: `bytes`, then
numcodecs' byte shuffle of whole elements (HDF5's shuffle, 2: the same transpose of the
elements' bytes), a zlib stream (deflate, 1), zstd (32015), blosc (32001) or bzip2 (307),
numcodecs' fletcher32 (HDF5's, 3: the same checksum after the data), and at most a `crc32c`
after them (left off the chunk served).

Shuffle, deflate and fletcher32 are in every build of HDF5; zstd, blosc and bzip2 are filter
plugins (hdf5plugin's), which HDF5 1.8, pyfive, jsfive, MATLAB, NCO or R on a system HDF5
lack: their chunks pass through only when the mount says its readers have the plugins
(`-o filters=plugins`). Anything else (those without plugins, gzip's header, a transpose,
sub-byte types, a shuffle of another element size) is decoded by zarrfs."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numcodecs

from ...codecs.bytes import BytesCodec
from ...codecs.crc32c import Crc32cCodec
from ...codecs.numcodecs_adapter import NumcodecsBytesCodec
from ...codecs.pipeline import Pipeline
from ...codecs.stored_form import NONE, ZLIB, ZSTD, StoredForm
from ...codecs.zstd import ZstdCodec
from . import structures as h5

Filters = list[tuple[int, list[int]]]  # (HDF5 filter id, its client values), in write order


@dataclass(frozen=True)
class Filtered:
    """Chunks HDF5 reads as stored: their form (compression, byte order, trailer; its bound
    sizes the slots) and the pipeline of filters that decodes them."""

    form: StoredForm
    filters: Filters
    extra: int = 0  # (bytes a chunk may hold past the form's bound: a checksum, a frame's)


def filtered(pipeline: Pipeline, itemsize: int, *, plugins: bool) -> Filtered | None:
    """How HDF5 decodes the chunks `pipeline` encodes, or None (zarrfs decodes them): with
    the filters of every HDF5 build, or also plugins' (`plugins`)."""
    codec = pipeline.array_to_bytes
    if (pipeline.array_codecs or not isinstance(codec, BytesCodec)
            or codec.chunk.data_type.sub_byte_bits is not None):
        return None
    rest = list(pipeline.bytes_codecs)
    shuffle = bool(rest) and _shuffles(rest[0], itemsize)
    rest = rest[1:] if shuffle else rest
    trailer = 4 if rest and isinstance(rest[-1], Crc32cCodec) else 0
    rest = rest[:-1] if trailer else rest
    fletcher = bool(rest) and isinstance(rest[-1], NumcodecsBytesCodec) and isinstance(
        rest[-1].codec, numcodecs.Fletcher32)
    rest = rest[:-1] if fletcher else rest
    compression = _compression(rest)
    if compression is None or (compression == NONE and not shuffle and not fletcher):
        return None
    if compression in PLUGINS and not plugins:
        return None
    order = codec.stored_dtype
    byteorder = None if order.itemsize == 1 else "big" if order.byteorder == ">" else "little"
    filters: Filters = [(h5.SHUFFLE, [itemsize])] if shuffle else []
    chunk_bytes = math.prod(codec.chunk.shape) * itemsize
    extra = 4 if fletcher else 0  # (fletcher32's checksum is part of the chunk served)
    if compression in OTHERS:
        ident, values, overhead = OTHERS[compression]
        filters.append((ident, values(itemsize, chunk_bytes)))
        extra += overhead(chunk_bytes)
        compression = NONE  # (its own bound: the slot is the chunk's size and `extra`)
    elif compression != NONE:
        filters.append((h5.ZSTD_FILTER, [3]) if compression == ZSTD else (h5.DEFLATE, [6]))
    if fletcher:
        filters.append((h5.FLETCHER32, []))
    return Filtered(StoredForm(compression, byteorder, trailer), filters, extra)


def _blosc_values(itemsize: int, size: int) -> list[int]:
    """hdf5-blosc's: filter revision 2, blosc 2, type size, chunk size (it reads the rest of a
    frame from the frame's own header)."""
    return [2, 2, itemsize, size]


def _bzip2_values(itemsize: int, size: int) -> list[int]:
    return [9]  # (the block size: used to compress only)


# Compressors whose stored frames are what an HDF5 filter of hdf5plugin decodes: (filter id,
# its client values from the element and chunk sizes, the most a chunk of `size` bytes grows).
BLOSC, BZIP2 = "blosc", "bzip2"
PLUGINS = frozenset({ZSTD, BLOSC, BZIP2})  # (compressors HDF5 decodes only through a plugin)
OTHERS: dict[str, tuple[int, Callable[[int, int], list[int]], Callable[[int], int]]] = {
    BLOSC: (32001, _blosc_values, lambda size: 16),
    BZIP2: (307, _bzip2_values, lambda size: size // 100 + 600),
}


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
    if isinstance(codec, NumcodecsBytesCodec) and isinstance(codec.codec, numcodecs.Blosc):
        return BLOSC
    if isinstance(codec, NumcodecsBytesCodec) and isinstance(codec.codec, numcodecs.BZ2):
        return BZIP2
    return None
