"""The bytes of TIFF directories (IFDs), classic or BigTIFF, for images whose pixel data lies
after them. Pure: a `TiffImage` lists its tags and where each of its tiles or strips lies;
`tiff_header` lays out the file header, every IFD and the tag values that do not fit in an
entry, and says where the data may start.

Offsets of tiles depend on where the data starts, which depends on the header's length: the
header is built once with the tile positions relative to the data, its length taken, and the
positions moved by it (`TiffImage.with_data_at`).

The tile tables are not in the header's bytes: their place is kept, and their values are made
when a reader reads there (`TiffHeader.read`; `tables`): a header of 10^6 tiles holds a
few hundred bytes. A table whose values are learned from the store (`TagTable.lazy`) is never
made before it is read, even when it fits in its IFD entry, and starts a page of its own
(`TABLE_PAGE`), so that a reader reading pages of the offsets and the byte counts (libtiff)
reads the same tiles' entries in both.

No IFD, first read of one, or table or other values outside an entry ends on a block of
geotiff.js 2's cache (`reader_blocks`): where one would, zeros before it (a word, or a table's
alignment, or two)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from .reader_blocks import IFD_FIRST_READ, clear_of_block_ends
from .tables import TagTable

# Tag types: (TIFF type code, struct format of one value)
BYTE, ASCII, SHORT, LONG, DOUBLE, IFD, LONG8, IFD8 = 1, 2, 3, 4, 12, 13, 16, 18
_FORMATS = {BYTE: "B", ASCII: "B", SHORT: "H", LONG: "I", DOUBLE: "d", IFD: "I", LONG8: "Q", IFD8: "Q"}
CLASSIC_LIMIT = 1 << 32  # offsets of classic TIFF are 32-bit
HEADER_ROOM = 1 << 20
TABLE_PAGE = 4096  # (libtiff's page of a table it reads lazily: IO_CACHE_PAGE_SIZE)

NEW_SUBFILE_TYPE, IMAGE_WIDTH, IMAGE_LENGTH, BITS_PER_SAMPLE, COMPRESSION = 254, 256, 257, 258, 259
PHOTOMETRIC, IMAGE_DESCRIPTION, STRIP_OFFSETS, SAMPLES_PER_PIXEL, ROWS_PER_STRIP = 262, 270, 273, 277, 278
STRIP_BYTE_COUNTS, PLANAR_CONFIGURATION, SOFTWARE, TILE_WIDTH, TILE_LENGTH = 279, 284, 305, 322, 323
TILE_OFFSETS, TILE_BYTE_COUNTS, SUB_IFDS, EXTRA_SAMPLES, SAMPLE_FORMAT = 324, 325, 330, 338, 339


@dataclass(frozen=True)
class Tag:
    code: int
    kind: int
    values: bytes | tuple[float, ...] | np.ndarray | TagTable  # ASCII: bytes (without the NUL)

    @classmethod
    def ascii(cls, code: int, text: str) -> Tag:
        return cls(code, ASCII, text.encode("utf-8"))

    @classmethod
    def shorts(cls, code: int, *values: int) -> Tag:
        return cls(code, SHORT, tuple(values))

    @classmethod
    def long(cls, code: int, value: int) -> Tag:
        return cls(code, LONG, (value,))

    @classmethod
    def doubles(cls, code: int, values: Sequence[float]) -> Tag:
        return cls(code, DOUBLE, tuple(float(v) for v in values))

    def count(self) -> int:
        if self.kind == ASCII:
            assert isinstance(self.values, bytes)
            return len(self.values) + 1
        return len(self.values)

    def number_format(self, order: str) -> str:
        """The numpy type of one value of a numeric table."""
        return f"{order}u{8 if self.kind in (LONG8, IFD8) else 4}"

    def encoded(self, order: str, big: bool) -> bytes:
        kind = self.kind
        if isinstance(self.values, TagTable):
            return self.values.values(0, len(self.values)).astype(self.number_format(order)).tobytes()
        if isinstance(self.values, np.ndarray):
            return self.values.astype(self.number_format(order)).tobytes()
        if kind == ASCII:
            assert isinstance(self.values, bytes)
            return self.values + b"\0"
        return struct.pack(f"{order}{len(self.values)}{_FORMATS[kind]}", *self.values)


@dataclass(frozen=True)
class TiffImage:
    """One IFD: its tags, and its pixel data as offsets relative to the start of the data
    (`offsets`, with `byte_counts`; TileOffsets or StripOffsets by `tiled`). `sub_images` are
    written as its SubIFDs (reduced resolutions)."""

    tags: tuple[Tag, ...]
    offsets: TagTable
    byte_counts: TagTable
    tiled: bool
    sub_images: tuple[TiffImage, ...] = field(default=())

    def with_data_at(self, start: int) -> TiffImage:
        return replace(self, offsets=self.offsets.shifted(start),
                       sub_images=tuple(s.with_data_at(start) for s in self.sub_images))


@dataclass(frozen=True)
class PlacedTable:
    """A table's values at `at` in the header, each of numpy type `number`."""

    at: int
    table: TagTable
    number: str

    @property
    def end(self) -> int:
        return self.at + len(self.table) * np.dtype(self.number).itemsize


@dataclass(frozen=True)
class TiffHeader:
    contents: bytes  # (zeros where the tables are)
    tables: tuple[PlacedTable, ...]
    big: bool
    data_start: int

    def read(self, offset: int, size: int, *, wait: bool = True) -> bytes | None:
        """Bytes [offset, offset + size) of the header and the zeros after it up to the data;
        None, unless `wait`, when a table there would wait on the store."""
        stop = min(offset + size, self.data_start)
        found = bytearray(self.contents[offset:stop])
        found += bytes(max(0, stop - offset) - len(found))
        for placed in self.tables:
            if placed.at < stop and placed.end > offset and not _fill(found, offset, placed, wait):
                return None
        return bytes(found)


def _fill(found: bytearray, offset: int, placed: PlacedTable, wait: bool) -> bool:
    """Put the values of `placed` that fall in `found` (bytes from `offset`) there (False:
    they would wait, and not `wait`)."""
    itemsize = np.dtype(placed.number).itemsize
    start = max(offset, placed.at)
    stop = min(offset + len(found), placed.end)
    first, last = (start - placed.at) // itemsize, -(-(stop - placed.at) // itemsize)
    table = placed.table
    values = table.values(first, last) if wait else table.values_now(first, last)
    if values is None:
        return False
    encoded = values.astype(placed.number).tobytes()
    skip = start - placed.at - first * itemsize
    found[start - offset : stop - offset] = encoded[skip : skip + stop - start]
    return True


def tiff_header(images: Sequence[TiffImage], data_bytes: int, byteorder: str = "little") -> TiffHeader:
    """The bytes before the data of a file holding `images` (top-level IFDs, chained) whose
    pixel data takes `data_bytes` after them. BigTIFF when the file passes 4 GiB."""
    start = _start(_layout(images, 0, byteorder, big=False)[2])
    big = start + data_bytes >= CLASSIC_LIMIT
    if big:
        start = _start(_layout(images, 0, byteorder, big=True)[2])
    contents, tables, _ = _layout(images, start, byteorder, big=big)
    return TiffHeader(contents, tables, big=big, data_start=start)


def _start(header_bytes: int) -> int:
    """Where the data starts: past the first MiB, which readers read whole to find the
    header (tifffile does), so that it holds nothing that costs a fetch; at a multiple of it,
    so that the data's aligned tiles stay aligned in the file."""
    return max(header_bytes + (-header_bytes) % HEADER_ROOM, HEADER_ROOM)


class _Writer:
    """Appends IFDs and out-of-line values, word-aligned, to one buffer."""

    def __init__(self, order: str, big: bool) -> None:
        self.order = order
        self.big = big
        self.buffer = bytearray()
        self.later: list[tuple[int, TagTable, str]] = []  # (where its offset goes, table, type)
        self.inline: list[PlacedTable] = []  # (lazy tables in their IFD entries)

    def place_tables(self) -> tuple[tuple[PlacedTable, ...], int]:
        """Place the large tables after everything else (kept out of the buffer: 16 MB of
        zeros for 10^6 tiles); the tables and where the header ends."""
        end, placed = len(self.buffer), list(self.inline)
        for field_at, table, number in self.later:
            align = TABLE_PAGE if table.lazy else 8
            end = clear_of_block_ends(end + (-end) % align, [len(table) * np.dtype(number).itemsize], align)
            self.put(field_at, struct.pack(self.offset_format(), end))
            placed.append(PlacedTable(end, table, number))
            end = placed[-1].end
        return tuple(placed), end

    def offset_format(self) -> str:
        return f"{self.order}{'Q' if self.big else 'I'}"

    def reserve(self, size: int, *reads: int) -> int:
        """Room for `size` bytes, word-aligned, from which neither they nor the other `reads`
        (lengths a reader reads from there: an IFD's first read) end on a block."""
        where = clear_of_block_ends(len(self.buffer) + len(self.buffer) % 2, [size, *reads], 2)
        self.buffer += bytes(where + size - len(self.buffer))
        return where

    def put(self, where: int, data: bytes) -> None:
        self.buffer[where : where + len(data)] = data


def _layout(images: Sequence[TiffImage], data_at: int, byteorder: str, *,
            big: bool) -> tuple[bytes, tuple[PlacedTable, ...], int]:
    """The header's bytes (up to its tables), its tables, and where it ends."""
    order = "<" if byteorder == "little" else ">"
    writer = _Writer(order, big)
    mark = b"II" if order == "<" else b"MM"
    if big:
        writer.buffer += mark + struct.pack(f"{order}HHH", 43, 8, 0) + b"\0" * 8
        first_pointer = 8
    else:
        writer.buffer += mark + struct.pack(f"{order}H", 42) + b"\0" * 4
        first_pointer = 4
    placed = [image.with_data_at(data_at) for image in images]
    pointer = first_pointer
    for image in placed:
        where = _write_ifd(writer, image)
        writer.put(pointer, struct.pack(writer.offset_format(), where))
        pointer = where + (8 if big else 2) + len(_all_tags(image, big, [])) * (20 if big else 12)
    tables, end = writer.place_tables()
    return bytes(writer.buffer), tables, end


def _all_tags(image: TiffImage, big: bool, sub_ifds: list[int]) -> list[Tag]:
    kind = LONG8 if big else LONG
    offsets_code, counts_code = (TILE_OFFSETS, TILE_BYTE_COUNTS) if image.tiled else (STRIP_OFFSETS,
                                                                                      STRIP_BYTE_COUNTS)
    tags = [*image.tags, Tag(offsets_code, kind, image.offsets), Tag(counts_code, kind, image.byte_counts)]
    if image.sub_images:
        values = np.array(sub_ifds or [0] * len(image.sub_images), dtype=np.uint64)
        tags.append(Tag(SUB_IFDS, IFD8 if big else IFD, values))
    return sorted(tags, key=lambda tag: tag.code)


def _write_ifd(writer: _Writer, image: TiffImage) -> int:
    """Write `image`'s IFD (and its SubIFDs after it); the IFD's offset."""
    big, order = writer.big, writer.order
    entry_size, count_format = (20, "Q") if big else (12, "H")
    inline = 8 if big else 4
    tags = _all_tags(image, big, [])
    size = (8 if big else 2) + len(tags) * entry_size + (8 if big else 4)
    where = writer.reserve(size, IFD_FIRST_READ[big])
    subs = [_write_ifd(writer, sub) for sub in image.sub_images]
    tags = _all_tags(image, big, subs)
    entries = [struct.pack(f"{order}{count_format}", len(tags))]
    count_bytes = 8 if big else 2
    for number, tag in enumerate(tags):
        field_at = where + count_bytes + number * entry_size + 4 + (8 if big else 4)
        field_bytes = _field(writer, tag, inline, field_at)
        count = struct.pack(f"{order}{'Q' if big else 'I'}", tag.count())
        entries.append(struct.pack(f"{order}HH", tag.code, tag.kind) + count + field_bytes)
    writer.put(where, b"".join(entries))  # (the next-IFD pointer, zero, is filled by the caller)
    return where


def _field(writer: _Writer, tag: Tag, inline: int, field_at: int) -> bytes:
    """An entry's value field (at `field_at` in the header): the value, or where it is put.
    A large table goes after every IFD, its values made as read (`Writer.place_tables`)."""
    number = tag.number_format(writer.order)
    if isinstance(tag.values, TagTable) and len(tag.values) * np.dtype(number).itemsize > inline:
        writer.later.append((field_at, tag.values, number))
        return bytes(inline)
    if isinstance(tag.values, TagTable) and tag.values.lazy:  # (made as read, in the entry itself)
        writer.inline.append(PlacedTable(field_at, tag.values, number))
        return bytes(inline)
    value = tag.encoded(writer.order, writer.big)
    if len(value) <= inline:
        return value + b"\0" * (inline - len(value))
    at = writer.reserve(len(value))
    writer.put(at, value)
    return struct.pack(writer.offset_format(), at)
