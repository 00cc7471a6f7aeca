"""The files of a mounted array: byte ranges in a file <-> regions of the array.

Nothing here knows FUSE. Each `FileView` reads and writes bytes and declares what the fuse
layer needs to know of it (page cache or direct I/O, sequential prefetch). Views depend only
on the `RegionArray` protocol, so they can be tested against a plain numpy array.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..errors import ZarrfsError
from ..formats import DataType
from ..grid import Box, Index, cells_of, flat_boxes


class FileTooLargeError(ZarrfsError, OSError):
    """A write starts at or past the end of a file whose size is fixed (EFBIG)."""


class RegionArray(Protocol):
    """What a view needs of an array (zarrfs.array.ZarrArray provides it)."""

    data_type: DataType
    shape: Index
    chunk_shape: Index
    grid_shape: Index
    raw_metadata: bytes

    @property
    def read_only(self) -> bool: ...

    def read(self, box: Box) -> np.ndarray: ...
    def write(self, box: Box, values: np.ndarray) -> None: ...
    def prefetch(self, box: Box) -> None: ...
    def flush(self) -> None: ...
    def chunk_key(self, chunk: Sequence[int]) -> str: ...


# -- file views -------------------------------------------------------------------------------


class FileView(Protocol):
    """A file's contents, and how the fuse layer should serve it."""

    @property
    def size(self) -> int: ...

    @property
    def writable(self) -> bool: ...

    @property
    def direct_io(self) -> bool:
        """Served without the page cache: always current, even when another view of the
        same bytes was written (chunk files)."""

    @property
    def prefetches(self) -> bool:
        """Worth reading ahead of a sequential reader (decoding is the slow part)."""

    def read(self, offset: int, size: int) -> bytes | memoryview: ...
    def write(self, offset: int, data: bytes | memoryview) -> int: ...
    def prefetch(self, offset: int, size: int) -> None: ...
    def flush(self) -> None: ...


@dataclass(frozen=True)
class BytesFile:
    """A read-only file with fixed contents (metadata files, as stored)."""

    contents: bytes
    writable: bool = False
    direct_io: bool = False
    prefetches: bool = False

    @property
    def size(self) -> int:
        return len(self.contents)

    def read(self, offset: int, size: int) -> bytes:
        return self.contents[offset : offset + size]

    def write(self, offset: int, data: bytes | memoryview) -> int:
        raise PermissionError("read-only file")

    def prefetch(self, offset: int, size: int) -> None:
        return None

    def flush(self) -> None:
        return None


class RegionFile:
    """A hyperrectangle of the array as a flat C-order file in a chosen byte order.

    `data` is the whole array; a chunk file is the region of one chunk of the grid (edge
    chunks include their overhang, which holds the fill value)."""

    prefetches = True

    def __init__(self, array: RegionArray, region: Box, byteorder: str = "little", *,
                 direct_io: bool = False) -> None:
        self.array = array
        self.direct_io = direct_io
        self.region = region
        self.itemsize = array.data_type.itemsize
        self.size = region.size * self.itemsize
        self.writable = not array.read_only
        storage = array.data_type.storage
        self.file_dtype = storage.newbyteorder("<" if byteorder == "little" else ">")
        self._convert = self.itemsize > 1 and not self.file_dtype.isnative

    def boxes(self, offset: int, size: int) -> list[Box]:
        """The array regions holding bytes [offset, offset + size) of the file, in order."""
        first = offset // self.itemsize
        last = -(-min(offset + size, self.size) // self.itemsize)
        origin = self.region.start
        return [
            Box(_shift(b.start, origin), _shift(b.stop, origin))
            for b in flat_boxes(self.region.shape, first, last)
        ]

    def read(self, offset: int, size: int) -> bytes | memoryview:
        size = max(0, min(size, self.size - offset))
        if size == 0:
            return b""
        boxes = self.boxes(offset, size)
        parts = [self._to_file_order(self.array.read(box)) for box in boxes]
        skip = offset % self.itemsize
        # As bytes: some element types (bfloat16) export no buffer format, and concatenating
        # non-native arrays would swap them back to native order.
        raw = [p.reshape(-1).view(np.uint8) for p in parts]
        joined = raw[0] if len(raw) == 1 else np.concatenate(raw)
        return joined.data[skip : skip + size]

    def write(self, offset: int, data: bytes | memoryview) -> int:
        if offset >= self.size and len(data):
            raise FileTooLargeError(f"write at {offset} is past the end of a {self.size}-byte file")
        data = memoryview(data).cast("B")[: self.size - offset]
        if not data:
            return 0
        first = offset - offset % self.itemsize
        end = offset + len(data)
        last = min(end + (-end) % self.itemsize, self.size)
        if first != offset or last != end:
            # Partial elements at either end: merge the new bytes into the current ones.
            merged = bytearray(self.read(first, last - first))
            merged[offset - first : offset - first + len(data)] = data
            data = memoryview(merged)
        values = self._from_file_order(np.frombuffer(data, dtype=self.file_dtype))
        position = 0
        for box in self.boxes(first, last - first):
            count = box.size
            self.array.write(box, values[position : position + count].reshape(box.shape))
            position += count
        return end - offset

    def prefetch(self, offset: int, size: int) -> None:
        size = max(0, min(size, self.size - offset))
        for box in self.boxes(offset, size):
            self.array.prefetch(box)

    def flush(self) -> None:
        self.array.flush()

    def chunks_touched(self, offset: int, size: int) -> set[Index]:
        """The chunk-grid cells whose contents bytes [offset, offset + size) belong to."""
        return {
            piece.cell
            for box in self.boxes(offset, size)
            for piece in cells_of(box, self.array.chunk_shape)
        }

    def _to_file_order(self, values: np.ndarray) -> np.ndarray:
        if self._convert:
            return values.astype(self.file_dtype)
        return np.ascontiguousarray(values)

    def _from_file_order(self, values: np.ndarray) -> np.ndarray:
        if self.array.data_type.kind == "bool":
            nonzero: np.ndarray = values.view(np.uint8) != 0
            return nonzero
        if self.array.data_type.name == "int4":
            return ((values.view(np.uint8) & 0x0F) ^ 8).astype(np.int8) - np.int8(8)
        converted: np.ndarray = values.astype(self.array.data_type.storage, copy=False)
        return converted


def _shift(index: Index, origin: Index) -> Index:
    return tuple(i + o for i, o in zip(index, origin, strict=True))
