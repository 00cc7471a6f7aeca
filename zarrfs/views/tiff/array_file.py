"""`data.tif`: an array as a tiled TIFF (GeoTIFF where it is placed), read-only.

Its tiles are the array's read chunks, so a reader of one tile costs one chunk. Where the
chunks' codecs are only `bytes` (in the file's byte order) and zstd, a zlib stream or nothing
(`codecs.stored_form`), a tile is the chunk's stored bytes as they are: zarrfs decodes
nothing and the reader decompresses; a chunk not stored is an encoded tile of fill
values. Other chunks go out decoded, uncompressed. Arrays whose chunks cannot be tiles (edges
not multiples of 16) get strips of whole rows, served from the flat bytes of the array.

The file is served without the page cache (direct I/O), so a tile read costs that tile and no
readahead. Its layout is made from the array's shape and codecs alone, at no store request:
each tile has a slot of its own, as long as the codec's bound, at an offset known in advance.
A compressed tile's byte count is its chunk's stored size, learned when a reader reads the
tables there (`tile_sizes`): a page of a table costs a look at the chunks of its tiles, never
a listing of the array; its bytes are the stored bytes and nothing else (`stored_tiles`).
The file is kept while the array's shape and elements are the same; each open learns again
the sizes and fetches again the tiles it had (close-to-open: `forget_fetched`)."""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

import numcodecs
import numpy as np

from ...codecs.stored_form import NONE, ZLIB, ZSTD, StoredForm
from ...formats import DataType
from ...grid import Index
from ..files import RANDOM_ACCESS_BLOCK, FileForm, ReadOnlyFile, RegionFile, StoredArray
from ..placement import Placement
from .directories import Tag, TiffImage, tiff_header
from .geotiff import geotiff_tags
from .layout import (
    Group,
    ImageShape,
    Pieces,
    Slots,
    TileBoxes,
    Tiling,
    grouped,
    image_tags,
    sample_format,
    strip_extents,
    strip_rows,
)
from .stored_tiles import SCRATCH, StoredTiles
from .tables import Stepped, Table
from .tile_sizes import Learned

# Every tile has a slot of its own, at an offset known without the store: a tile of 64 KiB and
# more (decoded) in slots aligned to the next power of two, up to 1 MiB (the largest request
# FUSE sends), smaller ones to a block, each slot as long as the tile can be encoded (the
# file is virtual: the zeros after a tile cost no fetch). A reader reading through a buffer
# (stdio, Python's buffered files) reads a tile's whole blocks straight into its own memory
# and fills its buffer with a last part block, which reaches into the slot's zeros and never
# into the next tile: a second request of the tile, served from the tile kept.
ALIGNED_TILE_BYTES, LARGEST_SLOT = 64 << 10, 1 << 20


def _slot_alignment(tile_bytes: int) -> int:
    if tile_bytes < ALIGNED_TILE_BYTES:
        return RANDOM_ACCESS_BLOCK
    return min(1 << (tile_bytes - 1).bit_length(), LARGEST_SLOT)


def _slot_size(longest: int, tile_bytes: int) -> int:
    align = _slot_alignment(tile_bytes)
    return -(-longest // align) * align


# The tiles (or pieces of them) one read reaches, fetched at once from a remote store: a reader's
# request of 1 MiB or of aligned pages reaches into several tiles, each a request of its own.
_PIECE_READS = ThreadPoolExecutor(8, thread_name_prefix="tiles")


class Typed(Protocol):
    """An array's shape and type (an opened array's, or a description's)."""

    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def data_type(self) -> DataType: ...


def shows_tiff(array: Typed) -> bool:
    return (ImageShape.of(array.shape) is not None
            and sample_format(array.data_type.kind, array.data_type.storage) is not None
            and _whole_int_range(array))


# Past this many tiles data.tif is left out: readers load the tile tables (16 bytes a tile in
# BigTIFF: 256 MiB here), and the daemon makes them; 10^9 tiles of a sparse giant would be
# 16 GB of table for a few chunks stored.
MAX_TILES = 1 << 24


def shows_array_tiff(array: StoredArray) -> bool:
    """Whether an opened array has `data.tif`: its type fits TIFF (`shows_tiff`) and its tile
    table fits readers (at most MAX_TILES tiles; strips, of an irregular grid, always fit)."""
    if not shows_tiff(array):
        return False
    if not array.regular_read_chunks:
        return True
    shape, chunk = array.shape, array.read_chunk_shape
    tiles = math.prod(shape[:-2]) * -(-shape[-2] // chunk[-2]) * -(-shape[-1] // chunk[-1])
    return tiles <= MAX_TILES


def _whole_int_range(array: Typed) -> bool:
    """Not a narrow integer type kept in a wider one (int4 in a byte)."""
    data_type = array.data_type
    if data_type.int_range is None:
        return True
    info = np.iinfo(data_type.storage)
    return data_type.int_range == (int(info.min), int(info.max))


def tiff_file(array: StoredArray, form: FileForm, placement: Callable[[], Placement]) -> TiffFile:
    """`data.tif`: a page per index of the dimensions before the last three, each the planes
    of the third from last as its samples, georeferenced as `placement` says."""
    image = ImageShape.of(array.shape)
    assert image is not None
    groups = image.groups()
    extra = tuple(geotiff_tags(placement(), image.samples))
    part = array_part(array, form.byteorder, groups, [extra] * len(groups))
    return TiffFile([part], lambda images: images[0], form.byteorder)


PieceReader = Callable[[int, int, int], "bytes | memoryview"]  # (piece, offset in it, byte count)
HeldReader = Callable[[int, int, int], "bytes | memoryview | None"]  # (the same, None: not held)


def _nothing_held(piece: int, at: int, count: int) -> None:
    return None


def _nothing_fetched() -> None:
    return None


@dataclass(frozen=True)
class Part:
    """One array's images in a TIFF file, their data at offsets relative to the part's own."""

    images: list[TiffImage]
    pieces: Pieces | Slots
    read_piece: PieceReader  # (past a piece's length only when `padded`)
    remote: bool = False  # (its pieces come from a remote store: a read's are fetched at once)
    held: HeldReader = _nothing_held  # (bytes at hand: answered without a worker thread)
    forget_fetched: Callable[[], None] = _nothing_fetched  # (what it keeps of the store)
    slot: int = 1  # (what its pieces are aligned to: the longest a tile may be)
    padded: bool = False  # (its readers give the zeros after each piece too)


def array_part(array: StoredArray, byteorder: str, groups: Sequence[Group], extra: Sequence[Sequence[Tag]], *,
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
    tile_bytes = read_chunk[-1] * read_chunk[-2] * array.data_type.itemsize

    def decoded(piece: int, at: int, count: int) -> bytes | memoryview:
        return RegionFile(array, boxes[piece], byteorder).read(at, count)

    form = array.stored_form
    if form is not None and _passes_through(form, byteorder, read_chunk):
        slots, tiles = _as_stored(array, boxes, form, tile_bytes,
                                  lambda tile: _encoded(form, decoded(tile, 0, tile_bytes)))
        images = grouped(groups, tags(form.compression, tiling), *_tile_tables(slots, tiles, tile_bytes),
                         tiled=True)
        return Part(images, slots, tiles.read, remote=array.fetches_remotely, held=tiles.held,
                    forget_fetched=tiles.forget, slot=slots.size, padded=True)
    slots = Slots(_slot_size(tile_bytes, tile_bytes), len(boxes), tile_bytes)
    same = Stepped(len(boxes), tile_bytes, 0)  # (every tile's byte count)
    images = grouped(groups, tags("none", tiling), slots.offsets(), same, tiled=True)
    return Part(images, slots, decoded, remote=array.fetches_remotely, slot=slots.size)


def _tile_tables(slots: Slots, tiles: StoredTiles, tile_bytes: int) -> tuple[Table, Table]:
    """TileOffsets and TileByteCounts of tiles as stored: learned as read where compressed,
    else the slots' and one count for all."""
    if tiles.sizes is None:
        return slots.offsets(), Stepped(slots.count, tile_bytes, 0)
    count = tiles.sizes.tiles
    return Learned(count, tiles.sizes, True), Learned(count, tiles.sizes, False)


def _passes_through(form: StoredForm, byteorder: str, read_chunk: Index) -> bool:
    return form.byteorder in (None, byteorder) and all(edge == 1 for edge in read_chunk[:-2])


def _as_stored(array: StoredArray, boxes: TileBoxes, form: StoredForm, tile_bytes: int,
               reencode: Callable[[int], bytes]) -> tuple[Slots, StoredTiles]:
    """Tiles as stored, each in a slot as long as the codec's bound; compressed ones with their
    stored sizes as byte counts (learned as read), and after them the one fill tile."""
    if array.dirty_bytes:
        array.flush()  # (the file shows what is stored)
    fill = bytes(array.encoded_fill())
    fill = fill[: len(fill) - form.trailer]
    learned = form.compression != NONE
    slot = _slot_size(max(form.bound(tile_bytes), len(fill)), tile_bytes)
    leading = array.read_chunk_shape[:-2]
    tiles = StoredTiles(array, lambda tile: boxes.chunk(tile, leading), fill, tiles=len(boxes), slot=slot,
                        trailer=form.trailer, reencode=reencode, skippable=form.compression == ZSTD,
                        learned=learned)
    return Slots(slot, len(boxes) + learned), tiles


def _encoded(form: StoredForm, tile: bytes | memoryview) -> bytes:
    """A decoded tile compressed as the file says its tiles are (within the codec's bound)."""
    if form.compression == ZSTD:
        return bytes(numcodecs.Zstd(level=1).encode(tile))
    if form.compression == ZLIB:
        return zlib.compress(tile)
    return bytes(tile)


Span = tuple["Part | None", int, int, int]  # (part, piece, offset in it, byte count); None: zeros


class TiffFile(ReadOnlyFile):
    """The header (IFDs and their values), then the data of each part in turn.

    Served without the page cache: a reader of one tile gets that tile, not the kernel's
    readahead of the tiles after it in the file (other rows of the image)."""

    direct_io = True

    def __init__(self, parts: Sequence[Part], arrange: Callable[[list[list[TiffImage]]], list[TiffImage]],
                 byteorder: str, *, smallest_first: bool = False) -> None:
        """`arrange` makes the file's IFDs (chained; SubIFDs below them) of each part's images.
        The parts' data follow the header in their order, or, `smallest_first`, the last part's
        first and the first's last: a cloud-optimized GeoTIFF's overviews before its image."""
        order = list(range(len(parts)))[:: -1 if smallest_first else 1]
        self._parts = [parts[number] for number in order]  # (in the order of their data)
        # Tiles are read one by one, in small blocks (see _slot and files.STREAM_BLOCK).
        self.block_size = RANDOM_ACCESS_BLOCK
        self._sizes = Pieces.of([part.pieces.total for part in self._parts], LARGEST_SLOT)
        base = {number: int(start) for number, start in zip(order, self._sizes.starts, strict=True)}
        shifted = [[image.with_data_at(base[number]) for image in part.images]
                   for number, part in enumerate(parts)]
        self.header = tiff_header(arrange(shifted), self._sizes.total, byteorder)
        self.big = self.header.big
        self.data_start = self.header.data_start
        self.size = self.data_start + self._sizes.total

    def read(self, offset: int, size: int) -> bytes | memoryview:
        head_size, spans = self._spans(offset, size)
        head = self.header.read(offset, head_size) if head_size else None
        if len(spans) > 1 and any(part is not None and part.remote for part, *_ in spans):
            found = list(_PIECE_READS.map(_span_bytes, spans))  # (round trips at once)
        else:
            found = [_span_bytes(span) for span in spans]
        return _joined(head, found)

    def readahead(self) -> TiffFile:
        """(Called in the thread that reads: the fuse thread's buffer for tiles is made now.)"""
        SCRATCH.reserve(max([0, *(part.slot for part in self._parts if part.padded)]))
        return self  # (the file's held tiles serve every open of it: see `ready`)

    def ready(self, offset: int, size: int) -> bytes | memoryview | None:
        """The bytes when all are at hand without a wait (the header, zeros, tiles read
        already or in the page cache), else None: answered without a worker thread. They
        may be a view of the thread's buffer, good until its next read (`StoredTiles.held`)."""
        head_size, spans = self._spans(offset, size)
        head = self.header.read(offset, head_size, wait=False) if head_size else None
        if head is None and head_size:  # (a tile table not learned yet: a worker learns it)
            return None
        found: list[bytes | memoryview] = []
        for span in spans:
            part = _span_bytes(span, held=True)
            if part is None:
                return None
            found.append(part if len(spans) == 1 else bytes(part))  # (before the next overwrites it)
        return _joined(head, found)

    def close(self) -> None:
        """An open of the file ends (what it holds is shared by every open: nothing to drop)."""

    def forget_fetched(self) -> None:
        """Fetch the tiles again as they are next read (an open's close-to-open recheck)."""
        for part in self._parts:
            part.forget_fetched()

    def _spans(self, offset: int, size: int) -> tuple[int, list[Span]]:
        """How many bytes from `offset` of [offset, offset + size) are the header's (read by
        the caller: a table there may wait), and the spans of the data's pieces there."""
        size = max(0, min(size, self.size - offset))
        head = max(0, min(size, self.data_start - offset))
        at = max(offset, self.data_start) - self.data_start
        spans: list[Span] = []
        for number, inside, count in self._sizes.spans(at, offset + size - self.data_start - at):
            part = self._parts[number]
            within = max(0, min(count, part.pieces.total - inside))
            spans += [(part, *span) for span in part.pieces.spans(inside, within)]
            if within < count:
                spans.append((None, 0, 0, count - within))
        return head, spans


def _span_bytes(span: Span, *, held: bool = False) -> bytes | memoryview | None:
    """A span's bytes (those past its piece's length are zeros); with `held`, None unless at hand."""
    part, piece, inside, count = span
    if part is None:
        return bytes(count)
    if part.padded:
        return (part.held if held else part.read_piece)(piece, inside, count)
    length = part.pieces.length(piece)
    if inside >= length:
        return bytes(count)
    wanted = min(count, length - inside)
    found = (part.held if held else part.read_piece)(piece, inside, wanted)
    return found if found is None or wanted == count else b"".join((found, bytes(count - wanted)))


def _joined(head: bytes | None, found: Sequence[bytes | memoryview | None]) -> bytes | memoryview:
    parts = [*([] if head is None else [head]), *(f for f in found if f is not None)]
    if len(parts) == 1:
        return parts[0]
    return b"".join(parts)
