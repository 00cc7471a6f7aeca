"""`data.tif`: an array as a tiled TIFF (GeoTIFF where it is placed), read-only.

Its tiles are the array's read chunks, so a reader of one tile costs one chunk. Where the
chunks' codecs are only `bytes` (in the file's byte order) and a compressor every TIFF reader
decodes (a zlib stream: TIFF's deflate) or none (`codecs.stored_form`), a tile is the chunk's
stored bytes as they are: zarrfs decodes nothing and the reader decompresses; a chunk not
stored is an encoded tile of fill values. Zstd chunks pass through so too with
`-o filters=plugins` (`plugins.PLUGIN_FILTERS`: readers with zstd, as GDAL and tifffile with
imagecodecs); on a default mount they go out decoded, as all other chunks do, uncompressed,
for every reader. Arrays whose chunks cannot be tiles (edges not multiples of 16) get strips
of whole rows of chunks, served from the flat bytes of the array; so does every array with
`-o tiff=strips` (`parts.STRIPS`: readers that read no tiles, as ImageJ 1.x).

The file is served without the page cache (direct I/O), so a tile read costs that tile and no
readahead. Its layout is made from the array's shape and codecs alone, at no store request:
each tile has a slot of its own, as long as the codec's bound, at an offset known in advance.
A compressed tile's byte count is its chunk's stored size, learned when a reader reads the
tables there (`tile_sizes`): a page of a table costs a look at the chunks of its tiles, never
a listing of the array; its bytes are the stored bytes and nothing else (`stored_tiles`). A
decoded tile's byte count is its decoded size; a request of a whole tile decodes it and keeps
it nowhere, a tile read in several requests is decoded once, at the first, and kept
(`decoded_tiles`).
The file is kept while the array's shape and elements are the same; each open learns again
the sizes and fetches again the tiles it had (close-to-open: `forget_fetched`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import numpy as np

from ...formats import DataType
from ..files import RANDOM_ACCESS_BLOCK, FileForm, ReadOnlyFile, StoredArray
from ..placement import Placement
from .directories import TiffImage, tiff_header
from .geotiff import geotiff_tags
from .layout import GAP, ImageShape, Pieces, sample_format
from .parts import LARGEST_SLOT, Part, array_part
from .stored_tiles import SCRATCH

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
    part = array_part(array, form, groups, [extra] * len(groups))
    return TiffFile([part], lambda images: images[0], form.byteorder)


PieceSpan = tuple["Part | None", int, int, int]  # (part, piece, offset in it, byte count); None: zeros


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

    def _spans(self, offset: int, size: int) -> tuple[int, list[PieceSpan]]:
        """How many bytes from `offset` of [offset, offset + size) are the header's (read by
        the caller: a table there may wait), and the spans of the data's pieces there."""
        size = max(0, min(size, self.size - offset))
        head = max(0, min(size, self.data_start - offset))
        at = max(offset, self.data_start) - self.data_start
        spans: list[PieceSpan] = []
        for number, inside, count in self._sizes.spans(at, offset + size - self.data_start - at):
            part = self._parts[number]
            within = max(0, min(count, part.pieces.total - inside))
            spans += [(part, *span) if span[0] != GAP else (None, 0, 0, span[2])
                      for span in part.pieces.spans(inside, within)]
            if within < count:
                spans.append((None, 0, 0, count - within))
        return head, spans


def _span_bytes(span: PieceSpan, *, held: bool = False) -> bytes | memoryview | None:
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
