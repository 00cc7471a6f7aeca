"""Where everything lies in `data.tif`: the pages of an array as TIFF images, and the byte
ranges of its data as pieces (tiles: one read chunk each; strips: the flat C-order bytes).
Pure index math, tested without FUSE or a store.

The last two dimensions are the image; a third from the end is its samples, in separate
planes (GDAL's bands); every index of the dimensions before those is a page (an IFD). Tiles
are the array's read chunks when their last two edges are multiples of 16 (TIFF's rule), else
(and with `-o tiff=strips`) the file has strips of whole rows of chunks.

No tile or strip ends on a multiple of 64 KiB in the file (`READER_BLOCK`): zeros before it
where it would, the page after a run of tiles (`Slots.laid`) or a few bytes (`LEAD`)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np

from ...grid import Box, Index
from ..files import RANDOM_ACCESS_BLOCK as PAGE
from .directories import (
    BITS_PER_SAMPLE,
    COMPRESSION,
    EXTRA_SAMPLES,
    IMAGE_LENGTH,
    IMAGE_WIDTH,
    LONG,
    NEW_SUBFILE_TYPE,
    PHOTOMETRIC,
    PLANAR_CONFIGURATION,
    ROWS_PER_STRIP,
    SAMPLE_FORMAT,
    SAMPLES_PER_PIXEL,
    SOFTWARE,
    TILE_LENGTH,
    TILE_WIDTH,
    Tag,
    TiffImage,
)
from .reader_blocks import READER_BLOCK
from .tables import Given, Stepped, TagTable

TILE_MULTIPLE = 16
STRIP_BYTES = 1 << 20  # strips of about this many bytes (whole rows), when there are no tiles
COMPRESSION_CODES = {"none": 1, "zlib": 8, "zstd": 50000}  # (8: Adobe Deflate, a zlib stream)
MAX_SAMPLES = 0xFFFF
_UINT, _INT, _FLOAT, _COMPLEX_FLOAT = 1, 2, 3, 6

# No tile or strip ends on a block of geotiff.js 2's cache (`reader_blocks`). A part's data
# starts on a multiple of it in the file (the header's MiB, parts a MiB apart), so where the
# part puts a piece is where it lies modulo a block.
LEAD = 16  # (zeros before a piece of any length that would end on a block: room its slot keeps)
GAP = -1  # (a span's piece: zeros before the pieces)


Plane = Index  # a plane's index in the array's dimensions before the last two
Group = tuple[Plane, ...]  # the planes of one TIFF image (its samples, in separate planes)


@dataclass(frozen=True)
class ImageShape:
    """An array's shape as TIFF sees it: `samples` planes of `height` x `width` per image,
    one image (page) per index of `pages`."""

    rank: int
    pages: Index  # the leading dimensions (rank >= 4), () otherwise
    samples: int
    height: int
    width: int

    @classmethod
    def of(cls, shape: Sequence[int]) -> ImageShape | None:
        if len(shape) < 2 or 0 in shape:
            return None
        samples = shape[-3] if len(shape) >= 3 else 1
        if samples > MAX_SAMPLES or max(shape[-2:]) >= 1 << 32:
            return None
        return cls(len(shape), tuple(shape[:-3]), samples, shape[-2], shape[-1])

    def groups(self) -> list[Group]:
        """The planes of each page, in file order."""
        if self.rank == 2:
            return [((),)]
        return [tuple((*page, sample) for sample in range(self.samples))
                for page in product(*(range(n) for n in self.pages))]


def sample_format(kind: str, dtype: np.dtype) -> tuple[int, int] | None:
    """TIFF's SampleFormat and BitsPerSample of an element type (None: TIFF has none).
    `kind` is the data type's kind; `dtype` its numpy storage type."""
    if kind == "bool":
        return _UINT, 8
    if kind == "int" and dtype.kind in "iu" and dtype.itemsize in (1, 2, 4, 8):
        return (_INT if dtype.kind == "i" else _UINT), dtype.itemsize * 8
    if kind == "float" and dtype.kind == "f" and dtype.itemsize in (2, 4, 8):
        return _FLOAT, dtype.itemsize * 8
    if kind == "complex" and dtype.kind == "c" and dtype.itemsize in (8, 16):
        return _COMPLEX_FLOAT, dtype.itemsize * 8
    return None


@dataclass(frozen=True)
class Tiling:
    """Tiles of `tile` (rows, columns): one per read chunk of each plane."""

    tile: tuple[int, int]

    @classmethod
    def fits(cls, read_chunk: Sequence[int]) -> bool:
        return all(edge % TILE_MULTIPLE == 0 for edge in read_chunk[-2:])

    def boxes(self, groups: Sequence[Group], height: int, width: int) -> TileBoxes:
        """Each tile's box in the array (edge tiles reach past it, as edge chunks do), in file order."""
        planes = tuple(plane for group in groups for plane in group)
        return TileBoxes(planes, -(-height // self.tile[0]), -(-width // self.tile[1]), self.tile)


@dataclass(frozen=True)
class TileBoxes:
    """Tiles' boxes, each made when asked for (an image may have millions of tiles: making
    them all cost an open of `data.tif` 0.17 s per 100,000)."""

    planes: tuple[Plane, ...]
    rows: int
    columns: int
    tile: tuple[int, int]

    def __len__(self) -> int:
        return len(self.planes) * self.rows * self.columns

    def __getitem__(self, number: int) -> Box:
        plane, inside = divmod(number, self.rows * self.columns)
        row, column = divmod(inside, self.columns)
        (height, width), leading = self.tile, self.planes[plane]
        return Box((*leading, row * height, column * width),
                   (*(i + 1 for i in leading), (row + 1) * height, (column + 1) * width))

    def chunk(self, number: int, leading_chunk: Index) -> Index:
        """Tile `number`'s read chunk (tiles are read chunks' last two dimensions), whose
        dimensions before the last two are `leading_chunk`'s edges."""
        plane, inside = divmod(number, self.rows * self.columns)
        leading = tuple(i // edge for i, edge in zip(self.planes[plane], leading_chunk, strict=True))
        return (*leading, *divmod(inside, self.columns))


def strip_rows(width: int, height: int, itemsize: int) -> int:
    """Rows per strip: as many whole rows as fit in STRIP_BYTES (at least one)."""
    return max(1, min(height, STRIP_BYTES // max(1, width * itemsize)))


def chunk_strip_rows(chunk_height: int, width: int, height: int, itemsize: int) -> int:
    """Rows per strip of an image in rows of chunks `chunk_height` high: as many whole rows of
    chunks as fit in STRIP_BYTES, or, where one row of chunks is larger, the largest part of
    it that fits and divides it evenly. So no strip reaches into two rows of chunks (a strip
    read decodes one row of chunks, not two), and none is larger than `strip_rows`'."""
    fit = strip_rows(width, height, itemsize)
    if fit == height:
        return height  # (the whole image in one strip)
    if fit >= chunk_height:
        return fit - fit % chunk_height
    return _largest_divisor_at_most(chunk_height, fit)


def _largest_divisor_at_most(number: int, bound: int) -> int:
    """(Divisors come in pairs around the square root: a few thousand steps for any chunk.)"""
    pairs = ((small, number // small) for small in range(1, math.isqrt(number) + 1) if number % small == 0)
    return max(divisor for pair in pairs for divisor in pair if divisor <= bound)


def image_tags(samples: int, height: int, width: int, fmt: tuple[int, int], compression: str,
               tiling: Tiling | None, rows_per_strip: int, *, reduced: bool = False) -> tuple[Tag, ...]:
    """The tags of one image, but for where its data is (and what the caller adds)."""
    code, bits = fmt
    tags = [Tag.long(NEW_SUBFILE_TYPE, 1 if reduced else 0), Tag.long(IMAGE_WIDTH, width),
            Tag.long(IMAGE_LENGTH, height), Tag.shorts(BITS_PER_SAMPLE, *[bits] * samples),
            Tag.shorts(COMPRESSION, COMPRESSION_CODES[compression]), Tag.shorts(PHOTOMETRIC, 1),
            Tag.shorts(SAMPLES_PER_PIXEL, samples), Tag.shorts(PLANAR_CONFIGURATION, 2 if samples > 1 else 1),
            Tag.ascii(SOFTWARE, "zarrfs"), Tag.shorts(SAMPLE_FORMAT, *[code] * samples)]
    if samples > 1:
        tags.append(Tag.shorts(EXTRA_SAMPLES, *[0] * (samples - 1)))
    if tiling is not None:
        tags += [Tag(TILE_WIDTH, LONG, (tiling.tile[1],)), Tag(TILE_LENGTH, LONG, (tiling.tile[0],))]
    else:
        tags.append(Tag.long(ROWS_PER_STRIP, rows_per_strip))
    return tuple(tags)


def grouped(groups: Sequence[Group], tags: Sequence[tuple[Tag, ...]], offsets: TagTable, counts: TagTable,
            tiled: bool) -> list[TiffImage]:
    """One TiffImage per group, each taking its share of the offsets (in file order)."""
    images, start = [], 0
    per_plane = len(offsets) // sum(len(group) for group in groups)
    for group, own in zip(groups, tags, strict=True):
        stop = start + per_plane * len(group)
        images.append(TiffImage(own, offsets.part(start, stop), counts.part(start, stop), tiled))
        start = stop
    return images


def strip_extents(groups: Sequence[Group], leading: Index, height: int, width: int, itemsize: int,
                  rows: int) -> tuple[Given, Given]:
    """Offsets (in the flat C-order bytes of an array whose dimensions before the last two are
    `leading`) and byte counts of every strip of the planes of `groups`, in file order."""
    row_bytes = width * itemsize
    plane_bytes = height * row_bytes
    per_plane = -(-height // rows)
    planes = [plane for group in groups for plane in group]
    numbers = np.array([np.ravel_multi_index(plane, leading) if plane else 0 for plane in planes],
                       dtype=np.uint64)
    starts = np.arange(per_plane, dtype=np.uint64) * np.uint64(rows * row_bytes)
    counts = np.full(per_plane, rows * row_bytes, dtype=np.uint64)
    counts[-1] = (height - (per_plane - 1) * rows) * row_bytes
    offsets = (numbers[:, None] * np.uint64(plane_bytes) + starts).reshape(-1)
    return Given.of(offsets), Given.of(np.tile(counts, len(planes)))


def leads(starts: np.ndarray | int, lengths: np.ndarray | int) -> np.ndarray:
    """LEAD where a piece at `starts` of `lengths` bytes would end on a block, else 0."""
    ends = np.asarray(starts, dtype=np.int64) + np.asarray(lengths, dtype=np.int64)
    return np.where(ends % READER_BLOCK == 0, LEAD, 0)


@dataclass(frozen=True)
class Pieces:
    """The data after the header as a run of pieces; piece i is [starts[i], starts[i] + lengths[i])
    of the data, then zeros up to the next piece (aligned pieces: a reader reading whole blocks
    of one reaches into no other)."""

    starts: np.ndarray
    lengths: np.ndarray
    total: int

    @classmethod
    def of(cls, lengths: Sequence[int] | np.ndarray, align: int = 1) -> Pieces:
        sizes = np.asarray(lengths, dtype=np.int64)
        ends = np.cumsum(-(-sizes // align) * align)
        starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
        return cls(starts, sizes, int(ends[-1]) if len(ends) else 0)

    @classmethod
    def placed(cls, lengths: Sequence[int] | np.ndarray) -> Pieces:
        """Pieces one after another, but for LEAD bytes of zeros before each that would end on
        a block (`READER_BLOCK`): a look at the pieces for each gap (strips: few)."""
        sizes = np.asarray(lengths, dtype=np.int64)
        ends = np.cumsum(sizes)
        shifts = np.zeros(len(sizes), dtype=np.int64)
        at, shift = 0, 0
        while len(hits := np.flatnonzero((ends[at:] + shift) % READER_BLOCK == 0)):
            at += int(hits[0])
            shift += LEAD
            shifts[at:] = shift
            at += 1
        return cls(ends - sizes + shifts, sizes, int(ends[-1]) + shift if len(ends) else 0)

    def length(self, piece: int) -> int:
        return int(self.lengths[piece])

    def spans(self, offset: int, size: int) -> Iterator[tuple[int, int, int]]:
        """(piece, offset in it, byte count) covering [offset, offset + size) of the data; the
        bytes of a span past its piece's length are zeros, and so are those of a GAP span."""
        end = min(offset + size, self.total)
        if len(self.starts) and offset < min(int(self.starts[0]), end):
            yield GAP, 0, min(int(self.starts[0]), end) - offset
            offset = int(self.starts[0])
        piece = int(np.searchsorted(self.starts, offset, side="right")) - 1
        while offset < end and piece < len(self.starts):
            inside = offset - int(self.starts[piece])
            stop = int(self.starts[piece + 1]) if piece + 1 < len(self.starts) else self.total
            count = min(stop, end) - offset
            if count > 0:
                yield piece, inside, count
                offset += count
            piece += 1


@dataclass(frozen=True)
class Slots:
    """The data as `count` slots of `size` bytes each, one after another from `first` on (zeros
    before), with `gap` bytes of zeros after each run of `every` (0: no gaps): tiles at offsets
    known without knowing any tile (the spans are those of `Pieces`; a piece's own bytes are
    the first `filled` of its slot, or all)."""

    size: int
    count: int
    filled: int = 0
    first: int = 0
    every: int = 0
    gap: int = 0

    @classmethod
    def laid(cls, size: int, count: int, length: int) -> Slots:
        """Slots of `size` bytes (whole pages) for tiles of `length` bytes, placed so that no
        tile ends on a block: where tiles end on pages, a page of zeros first, or (slots of an
        odd number of pages) a page after each run of a few, one page in 16 at most."""
        assert size % PAGE == 0
        if length % PAGE:
            return cls(size, count, length)  # (every tile ends inside a page)
        pages, filled, per_block = size // PAGE, length // PAGE, READER_BLOCK // PAGE
        common = math.gcd(pages, per_block)
        if common > 1:  # (tile n ends `first + filled + n * pages` pages in: all alike modulo `common`)
            return cls(size, count, length, PAGE * (filled % common == 0))
        # `every * pages + 1` pages a whole block: the j-th tile of each run ends j * pages pages
        # after a block's start (0 < j < 16: never on one)
        every = -pow(pages, -1, per_block) % per_block
        return cls(size, count, length, (pages - filled) % per_block * PAGE, every, PAGE)

    @property
    def total(self) -> int:
        return self.start(self.count - 1) + self.size if self.count else 0

    def start(self, piece: int) -> int:
        return self.first + piece * self.size + (piece // self.every * self.gap if self.every else 0)

    def length(self, piece: int) -> int:
        return self.filled or self.size

    def offsets(self) -> Stepped:
        return Stepped(self.count, self.first, self.size, self.every, self.gap)

    def spans(self, offset: int, size: int) -> Iterator[tuple[int, int, int]]:
        end = min(offset + size, self.total)
        if offset < min(self.first, end):
            yield GAP, 0, min(self.first, end) - offset
            offset = self.first
        while offset < end:
            piece, inside = self._slot_at(offset - self.first)
            count = min(self.start(piece + 1) - self.start(piece) - inside, end - offset)
            yield piece, inside, count
            offset += count

    def _slot_at(self, at: int) -> tuple[int, int]:
        """The slot at `at` past `first`, and where in it (the gap after a run: its last slot's)."""
        if not self.every:
            return divmod(at, self.size)
        run, inside = divmod(at, self.every * self.size + self.gap)
        number = min(inside // self.size, self.every - 1)
        return run * self.every + number, inside - number * self.size
