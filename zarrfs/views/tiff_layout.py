"""Where everything lies in `data.tif`: the pages of an array as TIFF images, and the byte
ranges of its data as pieces (tiles: one read chunk each; strips: the flat C-order bytes).
Pure index math, tested without FUSE or a store.

The last two dimensions are the image; a third from the end is its samples, in separate
planes (GDAL's bands); every index of the dimensions before those is a page (an IFD). Tiles
are the array's read chunks when their last two edges are multiples of 16 (TIFF's rule), else
the file has strips of whole rows."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np

from ..grid import Box, Index
from .tiff_format import (
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

TILE_MULTIPLE = 16
STRIP_BYTES = 1 << 20  # strips of about this many bytes (whole rows), when there are no tiles
COMPRESSION_CODES = {"none": 1, "zlib": 8, "zstd": 50000}  # (8: Adobe Deflate, a zlib stream)
MAX_SAMPLES = 0xFFFF
_UINT, _INT, _FLOAT, _COMPLEX_FLOAT = 1, 2, 3, 6


@dataclass(frozen=True)
class ImageShape:
    """An array's shape as TIFF sees it: pages of `samples` planes of `height` x `width`."""

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

    def planes(self) -> Iterator[Index]:
        """The index of each plane in the array's leading dimensions, in file order."""
        if self.rank == 2:
            yield ()
            return
        for page in product(*(range(n) for n in self.pages)):
            for sample in range(self.samples):
                yield (*page, sample)

    @property
    def page_count(self) -> int:
        return math.prod(self.pages)


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

    def grid(self, image: ImageShape) -> tuple[int, int]:
        return -(-image.height // self.tile[0]), -(-image.width // self.tile[1])

    def boxes(self, image: ImageShape) -> Iterator[Box]:
        """Each tile's box in the array (edge tiles reach past it, as edge chunks do), in file order."""
        rows, columns = self.grid(image)
        th, tw = self.tile
        for plane in image.planes():
            for row, column in product(range(rows), range(columns)):
                yield Box((*plane, row * th, column * tw), (*(i + 1 for i in plane), (row + 1) * th,
                                                            (column + 1) * tw))


def strip_rows(image: ImageShape, itemsize: int) -> int:
    return max(1, min(image.height, STRIP_BYTES // max(1, image.width * itemsize)))


def image_tags(image: ImageShape, fmt: tuple[int, int], compression: str, tiling: Tiling | None,
               rows_per_strip: int, extra: Sequence[Tag]) -> tuple[Tag, ...]:
    """The tags of one page, but for where its data is."""
    samples = image.samples
    code, bits = fmt
    tags = [Tag.long(NEW_SUBFILE_TYPE, 0), Tag.long(IMAGE_WIDTH, image.width),
            Tag.long(IMAGE_LENGTH, image.height), Tag.shorts(BITS_PER_SAMPLE, *[bits] * samples),
            Tag.shorts(COMPRESSION, COMPRESSION_CODES[compression]), Tag.shorts(PHOTOMETRIC, 1),
            Tag.shorts(SAMPLES_PER_PIXEL, samples), Tag.shorts(PLANAR_CONFIGURATION, 2 if samples > 1 else 1),
            Tag.ascii(SOFTWARE, "zarrfs"), Tag.shorts(SAMPLE_FORMAT, *[code] * samples), *extra]
    if samples > 1:
        tags.append(Tag.shorts(EXTRA_SAMPLES, *[0] * (samples - 1)))
    if tiling is not None:
        tags += [Tag(TILE_WIDTH, LONG, (tiling.tile[1],)), Tag(TILE_LENGTH, LONG, (tiling.tile[0],))]
    else:
        tags.append(Tag.long(ROWS_PER_STRIP, rows_per_strip))
    return tuple(tags)


def paged(image: ImageShape, tags: tuple[Tag, ...], offsets: np.ndarray, counts: np.ndarray,
          tiled: bool) -> list[TiffImage]:
    """One TiffImage per page, each taking its share of the offsets (in file order)."""
    per_page = len(offsets) // image.page_count
    return [TiffImage(tags, offsets[i * per_page : (i + 1) * per_page],
                      counts[i * per_page : (i + 1) * per_page], tiled)
            for i in range(image.page_count)]


def strip_extents(image: ImageShape, itemsize: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (in the flat C-order bytes of the array) and byte counts of every strip."""
    row_bytes = image.width * itemsize
    plane_bytes = image.height * row_bytes
    per_plane = -(-image.height // rows)
    planes = image.page_count * image.samples
    starts = np.arange(per_plane, dtype=np.uint64) * np.uint64(rows * row_bytes)
    counts = np.full(per_plane, rows * row_bytes, dtype=np.uint64)
    counts[-1] = (image.height - (per_plane - 1) * rows) * row_bytes
    offsets = (np.arange(planes, dtype=np.uint64)[:, None] * np.uint64(plane_bytes) + starts).reshape(-1)
    return offsets, np.tile(counts, planes)


@dataclass(frozen=True)
class Pieces:
    """The data after the header as a run of pieces; piece i is [starts[i], starts[i] + lengths[i])
    of the data."""

    starts: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of(cls, lengths: Sequence[int] | np.ndarray) -> Pieces:
        sizes = np.asarray(lengths, dtype=np.int64)
        return cls(np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64), sizes)

    @property
    def total(self) -> int:
        return int(self.starts[-1] + self.lengths[-1]) if len(self.starts) else 0

    def spans(self, offset: int, size: int) -> Iterator[tuple[int, int, int]]:
        """(piece, offset in it, byte count) covering [offset, offset + size) of the data."""
        end = min(offset + size, self.total)
        piece = int(np.searchsorted(self.starts, offset, side="right")) - 1
        while offset < end and piece < len(self.starts):
            inside = offset - int(self.starts[piece])
            count = min(int(self.lengths[piece]) - inside, end - offset)
            if count > 0:
                yield piece, inside, count
                offset += count
            piece += 1
