"""`data.tif`: an array as a tiled TIFF (GeoTIFF where it is placed), read-only.

Its tiles are the array's read chunks, so a reader of one tile costs one chunk. Where the
chunks' codecs are only `bytes` (in the file's byte order) and zstd, a zlib stream or nothing
(`codecs.stored_form`), a tile is the chunk's stored bytes as they are: zarrfs decodes
nothing and the reader decompresses; chunks not stored all point at one encoded tile of fill
values. Other chunks go out decoded, uncompressed. Arrays whose chunks cannot be tiles (edges
not multiples of 16) get strips of whole rows, served from the flat bytes of the array.

The file is served without the page cache (direct I/O), so a tile read costs that tile and no
readahead. The layout is made when the file is looked at (its size) and reused until the array changes:
stored chunks are located then (one listing, or the shard indexes), so a tile read needs
nothing but its bytes."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from ..array.cache import KeyedLocks
from ..array.chunk_io import StoredChunk
from ..codecs import BytesLike
from ..codecs.stored_form import StoredForm
from ..grid import Box, Index
from .files import RANDOM_ACCESS_BLOCK, ReadOnlyFile, RegionArray, RegionFile
from .geotiff import geotiff_tags
from .placement import Placement
from .tiff_format import Tag, TiffImage, tiff_header
from .tiff_layout import (
    Group,
    ImageShape,
    Pieces,
    Tiling,
    grouped,
    image_tags,
    sample_format,
    strip_extents,
    strip_rows,
)

HELD_TILE_BYTES = 32 << 20  # encoded tiles kept per open file (a tile is read in several requests)
# The tiles (or pieces of them) one read reaches, fetched at once from a remote store: a reader's
# request of 1 MiB or of aligned pages reaches into several tiles, each a request of its own.
_PIECE_READS = ThreadPoolExecutor(8, thread_name_prefix="tiles")


class TiffArray(RegionArray, Protocol):
    """What the view needs of an array beyond a region's elements: its stored chunks."""

    regular_read_chunks: bool  # (False: a rectilinear grid's chunks, of many shapes)

    @property
    def fetches_remotely(self) -> bool: ...

    @property
    def stored_form(self) -> StoredForm | None: ...
    @property
    def dirty_bytes(self) -> int: ...
    def locate_stored(self) -> dict[Index, Any]: ...
    def read_stored(self, where: Any) -> BytesLike: ...
    def encoded_fill(self) -> BytesLike: ...


def shows_tiff(array: RegionArray) -> bool:
    return (ImageShape.of(array.shape) is not None
            and sample_format(array.data_type.kind, array.data_type.storage) is not None
            and _whole_int_range(array))


def _whole_int_range(array: RegionArray) -> bool:
    """Not a narrow integer type kept in a wider one (int4 in a byte)."""
    data_type = array.data_type
    if data_type.int_range is None:
        return True
    info = np.iinfo(data_type.storage)
    return data_type.int_range == (int(info.min), int(info.max))


def tiff_file(array: TiffArray, byteorder: str, placement: Callable[[], Placement]) -> TiffFile:
    """`data.tif`: a page per index of the dimensions before the last three, each the planes
    of the third from last as its samples, georeferenced as `placement` says."""
    image = ImageShape.of(array.shape)
    assert image is not None
    groups = image.groups()
    extra = tuple(geotiff_tags(placement(), image.samples))
    part = array_part(array, byteorder, groups, [extra] * len(groups))
    return TiffFile([part], lambda images: images[0], byteorder)


PieceReader = Callable[[int, int, int], "bytes | memoryview"]  # (piece, offset in it, byte count)


@dataclass(frozen=True)
class Part:
    """One array's images in a TIFF file, their data at offsets relative to the part's own."""

    images: list[TiffImage]
    pieces: Pieces
    read_piece: PieceReader
    remote: bool = False  # (its pieces come from a remote store: a read's are fetched at once)


def array_part(array: TiffArray, byteorder: str, groups: Sequence[Group], extra: Sequence[Sequence[Tag]], *,
               reduced: bool = False) -> Part:
    """The images of `groups` (each the planes of one image) of `array`, each with its
    `extra` tags: tiles as stored where the chunks allow, decoded tiles, or strips."""
    fmt = sample_format(array.data_type.kind, array.data_type.storage)
    assert fmt is not None
    height, width = array.shape[-2:]
    read_chunk = array.read_chunk_shape

    def tags(compression: str, tiling: Tiling | None, rows: int = 0) -> list[tuple[Tag, ...]]:
        return [(*image_tags(len(group), height, width, fmt, compression, tiling, rows, reduced=reduced),
                 *own) for group, own in zip(groups, extra, strict=True)]

    if not (array.regular_read_chunks and Tiling.fits(read_chunk)):
        itemsize = array.data_type.itemsize
        rows = strip_rows(width, height, itemsize)
        offsets, counts = strip_extents(groups, tuple(array.shape[:-2]), height, width, itemsize, rows)
        flat = RegionFile(array, None, byteorder)
        return Part(grouped(groups, tags("none", None, rows), offsets, counts, tiled=False),
                    Pieces.of([flat.size]), lambda piece, at, count: flat.read(at, count))
    tiling = Tiling((read_chunk[-2], read_chunk[-1]))
    boxes = tiling.boxes(groups, height, width)
    form = array.stored_form
    if form is not None and _passes_through(form, byteorder, read_chunk):
        offsets, counts, pieces, read = _as_stored(array, boxes, form)
        images = grouped(groups, tags(form.compression, tiling), offsets, counts, tiled=True)
        return Part(images, pieces, read, remote=array.fetches_remotely)
    pieces = Pieces.of(np.full(len(boxes), read_chunk[-1] * read_chunk[-2] * array.data_type.itemsize))

    def decoded(piece: int, at: int, count: int) -> bytes | memoryview:
        return RegionFile(array, boxes[piece], byteorder).read(at, count)

    placed = pieces.starts.astype(np.uint64), pieces.lengths.astype(np.uint64)
    return Part(grouped(groups, tags("none", tiling), *placed, tiled=True), pieces, decoded,
                remote=array.fetches_remotely)


def _passes_through(form: StoredForm, byteorder: str, read_chunk: Index) -> bool:
    return form.byteorder in (None, byteorder) and all(edge == 1 for edge in read_chunk[:-2])


def _as_stored(array: TiffArray, boxes: list[Box], form: StoredForm) -> tuple[np.ndarray, np.ndarray, Pieces,
                                                                             PieceReader]:
    """Tiles as stored: the fill tile first, then every stored chunk's bytes in file order."""
    if array.dirty_bytes:
        array.flush()  # (the file shows what is stored)
    located = array.locate_stored()
    read_chunk = array.read_chunk_shape
    stored = [located.get(tuple(b // c for b, c in zip(box.start, read_chunk, strict=True))) for box in boxes]
    fill = bytes(array.encoded_fill())
    fill = fill[: len(fill) - form.trailer]
    pieces = Pieces.of([len(fill)] + [where.nbytes - form.trailer for where in stored if where is not None])
    offsets = np.zeros(len(boxes), dtype=np.uint64)
    counts = np.full(len(boxes), len(fill), dtype=np.uint64)
    sources: list[Any] = [None]
    for position, where in enumerate(stored):
        if where is not None:
            offsets[position] = pieces.starts[len(sources)]
            counts[position] = pieces.lengths[len(sources)]
            sources.append(where)
    held = HeldTiles(array.read_stored)

    def passed(piece: int, at: int, count: int) -> bytes | memoryview:
        return memoryview(fill)[at : at + count] if piece == 0 else held.get(piece, sources[piece], at, count)

    return offsets, counts, pieces, passed


class HeldTiles:
    """Encoded tiles as read from the store: whole when a read wants most of one (and kept a
    while, as a tile may come in several requests), else just the bytes asked for (a reader
    reading in aligned pages reaches a little into the tiles beside the one it wants)."""

    def __init__(self, read: Callable[[StoredChunk], BytesLike]) -> None:
        self._read = read
        self._lock = threading.Lock()
        self._loading = KeyedLocks()  # (one fetch of a tile at a time: its requests come together)
        self._held: OrderedDict[int, BytesLike] = OrderedDict()
        self._bytes = 0

    def get(self, piece: int, where: StoredChunk, at: int, count: int) -> memoryview:
        """Bytes [at, at + count) of the tile stored at `where`."""
        with self._loading((piece,)):
            with self._lock:
                found = self._held.get(piece)
                if found is not None:
                    self._held.move_to_end(piece)
                    return memoryview(found)[at : at + count]
            if 2 * count < where.nbytes:
                return memoryview(self._read(replace(where, offset=where.offset + at, nbytes=count)))
            data = self._read(where)
            with self._lock:
                self._held[piece] = data
                self._bytes += len(data)
                while self._bytes > HELD_TILE_BYTES and len(self._held) > 1:
                    self._bytes -= len(self._held.popitem(last=False)[1])
            return memoryview(data)[at : at + count]


class TiffFile(ReadOnlyFile):
    """The header (IFDs and their values), then the data of each part in turn.

    Served without the page cache: a reader of one tile gets that tile, not the kernel's
    readahead of the tiles after it in the file (other rows of the image)."""

    direct_io = True
    block_size = RANDOM_ACCESS_BLOCK  # (tiles are read one by one: see files.STREAM_BLOCK)

    def __init__(self, parts: Sequence[Part], arrange: Callable[[list[list[TiffImage]]], list[TiffImage]],
                 byteorder: str) -> None:
        """`arrange` makes the file's IFDs (chained; SubIFDs below them) of each part's images."""
        self._parts = list(parts)
        self._bases = np.concatenate([[0], np.cumsum([p.pieces.total for p in parts])]).astype(np.int64)
        shifted = [[image.with_data_at(int(base)) for image in part.images]
                   for part, base in zip(parts, self._bases, strict=False)]
        header = tiff_header(arrange(shifted), int(self._bases[-1]), byteorder)
        self.big = header.big
        self.header = header.contents
        self.data_start = header.data_start
        self.size = self.data_start + int(self._bases[-1])

    def read(self, offset: int, size: int) -> bytes | memoryview:
        size = max(0, min(size, self.size - offset))
        parts: list[bytes | memoryview] = []
        if offset < self.data_start:
            head = self.header[offset : offset + size]
            parts.append(head + b"\0" * (min(self.data_start, offset + size) - offset - len(head)))
        at = max(offset, self.data_start) - self.data_start
        end = offset + size - self.data_start
        reads: list[tuple[Part, int, int, int]] = []
        while at < end:
            number = int(np.searchsorted(self._bases, at, side="right")) - 1
            part, base = self._parts[number], int(self._bases[number])
            stop = min(end, int(self._bases[number + 1]))
            reads += [(part, *span) for span in part.pieces.spans(at - base, stop - at)]
            at = stop
        if len(reads) > 1 and any(part.remote for part, *_ in reads):  # (round trips at once)
            parts += _PIECE_READS.map(lambda read: read[0].read_piece(*read[1:]), reads)
        else:
            parts += [part.read_piece(piece, inside, count) for part, piece, inside, count in reads]
        if len(parts) == 1:
            return parts[0]
        return b"".join(parts)
