"""An array's images in a TIFF file (`Part`): tiles that are its chunks as stored, tiles decoded
from its cache of decoded chunks, or strips of its flat bytes (`array_file` says which, and why;
strips too wherever `-o tiff=strips` asks for them).
Pure: no FUSE, the array's own store."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numcodecs
import numpy as np

from ...codecs.stored_form import NONE, ZLIB, ZSTD, StoredForm
from ...declared import choice
from ...grid import Index
from ..files import RANDOM_ACCESS_BLOCK, FileForm, StoredArray
from ..plugins import PLUGIN_FILTERS
from ..region_file import RegionFile
from .decoded_tiles import DecodedTiles
from .directories import Tag, TiffImage
from .layout import (
    LEAD,
    Group,
    Pieces,
    Slots,
    TileBoxes,
    Tiling,
    chunk_strip_rows,
    grouped,
    image_tags,
    sample_format,
    strip_extents,
    strip_rows,
)
from .stored_tiles import StoredTiles
from .tables import Given, Stepped, TagTable
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


# `-o tiff=strips`: the TIFF views in strips, for readers that read no tiles (ImageJ 1.x).
STRIPS = choice(
    "tiff", {"tiles": False, "strips": True}, "tiles",
    "the form of the TIFF views (`data.tif`, `data.ome.tif`, the GeoTIFFs of multiscale groups): `tiles` "
    "(default) a tile a chunk, as stored or decoded as `filters=` says; `strips` uncompressed strips of "
    "whole rows of chunks (at most about 1 MiB each), decoded by the mount, for readers that read no tiles "
    "(ImageJ 1.x's own reader) as well as every other: a strip read costs its row of chunks, decoded once "
    "in the cache — see [views.md](views.md#strips-for-readers-that-read-no-tiles--o-tiffstrips)")

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


TagsOf = Callable[[str, "Tiling | None", int], list[tuple[Tag, ...]]]  # (compression, tiling, rows)


def array_part(array: StoredArray, form: FileForm, groups: Sequence[Group], extra: Sequence[Sequence[Tag]], *,
               reduced: bool = False) -> Part:
    """The images of `groups` (each the planes of one image) of `array`, each with its
    `extra` tags: tiles as stored where the chunks and `form` allow, decoded tiles, or strips
    (chunks that cannot be tiles, or `-o tiff=strips`: readers that read no tiles)."""
    fmt = sample_format(array.data_type.kind, array.data_type.storage)
    assert fmt is not None
    height, width = array.shape[-2:]

    def tags(compression: str, tiling: Tiling | None, rows: int = 0) -> list[tuple[Tag, ...]]:
        return [(*image_tags(len(group), height, width, fmt, compression, tiling, rows, reduced=reduced),
                 *own) for group, own in zip(groups, extra, strict=True)]

    read_chunk = array.read_chunk_shape
    if form.options[STRIPS] or not (array.regular_read_chunks and Tiling.fits(read_chunk)):
        return _strips_part(array, form.byteorder, groups, tags)
    tiling = Tiling((read_chunk[-2], read_chunk[-1]))
    boxes = tiling.boxes(groups, height, width)
    stored = array.stored_form
    if stored is not None and _passes_through(stored, form, read_chunk):
        return _stored_part(array, form.byteorder, groups, tags(stored.compression, tiling), boxes, stored)
    return _decoded_part(array, form.byteorder, groups, tags("none", tiling), boxes)


def _strips_part(array: StoredArray, byteorder: str, groups: Sequence[Group], tags: TagsOf) -> Part:
    """Strips of whole rows of chunks (`chunk_strip_rows`; of rows where the grid has no one
    chunk height), uncompressed, from the flat bytes of the array: every TIFF reader reads them,
    and a strip read decodes its rows of chunks once, in the array's cache."""
    height, width = array.shape[-2:]
    itemsize = array.data_type.itemsize
    if array.regular_read_chunks:
        rows = chunk_strip_rows(array.read_chunk_shape[-2], width, height, itemsize)
    else:
        rows = strip_rows(width, height, itemsize)
    offsets, counts = strip_extents(groups, tuple(array.shape[:-2]), height, width, itemsize, rows)
    flat = RegionFile(array, None, byteorder)
    in_flat = offsets.array  # (the strips cover the flat bytes once: pieces in their order)
    order = np.argsort(in_flat, kind="stable")
    pieces = Pieces.placed(counts.array[order])
    placed = np.empty(len(order), dtype=np.uint64)
    placed[order] = pieces.starts
    starts = in_flat[order]
    return Part(grouped(groups, tags("none", None, rows), Given.of(placed), counts, tiled=False),
                pieces, lambda piece, at, count: flat.read(int(starts[piece]) + at, count))


def _tile_bytes(array: StoredArray) -> int:
    return array.read_chunk_shape[-1] * array.read_chunk_shape[-2] * array.data_type.itemsize


def _decoded_part(array: StoredArray, byteorder: str, groups: Sequence[Group], tags: list[tuple[Tag, ...]],
                  boxes: TileBoxes) -> Part:
    """Uncompressed tiles, each its chunk's elements (fill values where it is not stored), every
    byte count the tile's size (`decoded_tiles`: a whole tile decoded and kept nowhere, one
    read in parts decoded at its first and kept); a tile kept or cached is answered at once."""
    tile_bytes = _tile_bytes(array)
    tiles = DecodedTiles(array, boxes, byteorder, tile_bytes)
    slots = Slots.laid(_slot_size(tile_bytes, tile_bytes), len(boxes), tile_bytes)
    same = Stepped(len(boxes), tile_bytes, 0)  # (every tile's byte count)
    images = grouped(groups, tags, slots.offsets(), same, tiled=True)
    return Part(images, slots, tiles.read, remote=array.fetches_remotely, held=tiles.held,
                forget_fetched=tiles.forget, slot=slots.size)


def _stored_part(array: StoredArray, byteorder: str, groups: Sequence[Group], tags: list[tuple[Tag, ...]],
                 boxes: TileBoxes, form: StoredForm) -> Part:
    """Tiles that are the chunks as stored (`_as_stored`)."""
    tile_bytes = _tile_bytes(array)
    decoded = DecodedTiles(array, boxes, byteorder, tile_bytes)
    slots, tiles = _as_stored(array, boxes, form, tile_bytes,
                              lambda tile: _encoded(form, decoded.read(tile, 0, tile_bytes)))
    images = grouped(groups, tags, *_tile_tables(slots, tiles, tile_bytes), tiled=True)
    return Part(images, slots, tiles.read, remote=array.fetches_remotely, held=tiles.held,
                forget_fetched=tiles.forget, slot=slots.size, padded=True)


def _tile_tables(slots: Slots, tiles: StoredTiles, tile_bytes: int) -> tuple[TagTable, TagTable]:
    """TileOffsets and TileByteCounts of tiles as stored: learned as read where compressed,
    else the slots' and one count for all."""
    if tiles.sizes is None:
        return slots.offsets(), Stepped(slots.count, tile_bytes, 0)
    count = tiles.sizes.tiles
    return Learned(count, tiles.sizes, True), Learned(count, tiles.sizes, False)


# The compressions whose tiles pass through as stored on every mount: every TIFF reader
# decodes them (no compression, and deflate, TIFF's 8, in every libtiff build, Pillow,
# tifffile without imagecodecs, ImageJ 1.x, Bio-Formats). Zstd (50000) is no baseline TIFF:
# its tiles pass through only with `-o filters=plugins`, else they are decoded (docs/views.md,
# "Which TIFF readers open it").
EVERY_READERS_COMPRESSIONS = frozenset({NONE, ZLIB})


def _passes_through(stored: StoredForm, form: FileForm, read_chunk: Index) -> bool:
    """Whether the chunks go out as stored: in the file's byte order, one plane each, and
    compressed as every reader decodes (or as the readers' plugins do, `-o filters=plugins`)."""
    readers_decode = form.options[PLUGIN_FILTERS] or stored.compression in EVERY_READERS_COMPRESSIONS
    return (readers_decode and stored.byteorder in (None, form.byteorder)
            and all(edge == 1 for edge in read_chunk[:-2]))


def _as_stored(array: StoredArray, boxes: TileBoxes, form: StoredForm, tile_bytes: int,
               reencode: Callable[[int], bytes]) -> tuple[Slots, StoredTiles]:
    """Tiles as stored, each in a slot as long as the codec's bound; compressed ones with their
    stored sizes as byte counts (learned as read), and after them the one fill tile, each with
    room for the LEAD of zeros before it where it would end on a block (`stored_tiles`);
    uncompressed ones laid as decoded tiles are (`Slots.laid`)."""
    if array.dirty_bytes:
        array.flush()  # (the file shows what is stored)
    fill = bytes(array.encoded_fill())
    fill = fill[: len(fill) - form.trailer]
    learned = form.compression != NONE
    slot = _slot_size(max(form.bound(tile_bytes), len(fill)) + LEAD * learned, tile_bytes)
    leading = array.read_chunk_shape[:-2]
    tiles = StoredTiles(array, lambda tile: boxes.chunk(tile, leading), fill, tiles=len(boxes), slot=slot,
                        trailer=form.trailer, reencode=reencode, skippable=form.compression == ZSTD,
                        learned=learned)
    return (Slots(slot, len(boxes) + 1) if learned else Slots.laid(slot, len(boxes), tile_bytes)), tiles


def _encoded(form: StoredForm, tile: bytes | memoryview) -> bytes:
    """A decoded tile compressed as the file says its tiles are (within the codec's bound)."""
    if form.compression == ZSTD:
        return bytes(numcodecs.Zstd(level=1).encode(tile))
    if form.compression == ZLIB:
        return zlib.compress(tile)
    return bytes(tile)
