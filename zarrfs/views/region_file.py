"""`data` and the chunk files: a region of the array as a flat file in a chosen byte order,
its byte ranges <-> the array's boxes, read, written, resized by its first axis, and read
ahead (priced in the store's requests: `readahead`). The file kind every view of an array's
elements is made of, or a header over it (`headered`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..array import FREE_REQUESTS, LOCAL_FREE_REQUESTS, Readahead, Slab, chunks_in, kernel_window_kb
from ..errors import ResizeError
from ..formats import from_low_bits
from ..grid import Box, Index, flat_boxes
from .files import STREAM_BLOCK, FileTooLargeError, FixedBytesError, RegionArray

__all__ = ["RegionFile"]


class RegionFile:
    """A hyperrectangle of the array as a flat C-order file in a chosen byte order.

    `data` is the whole array; a chunk file is the region of one chunk of the grid (edge
    chunks include their overhang, which holds the fill value)."""

    def __init__(self, array: RegionArray, region: Box | None, byteorder: str = "little", *,
                 direct_io: bool = False, resizer: Callable[[tuple[int, ...]], None] | None = None,
                 served: Callable[[np.ndarray], np.ndarray] | None = None,
                 served_dtype: np.dtype[Any] | None = None, remote: bool = True) -> None:
        """`region` None is the whole array, whatever its shape is now. `resizer`, when
        given, makes the file resizable: it gets the array's new shape. `served` makes the
        file read-only, of elements `served(values)` of type `served_dtype` (another type
        than the array's, in its byte order). `remote`: a read of the array's chunks waits on
        the network: reading ahead is priced in round trips (else in local reads, which cost
        tens of microseconds)."""
        self.array = array
        self.priced_in_requests = remote
        self.direct_io = direct_io
        self._region = region
        self._resizer = resizer
        self._served = served
        self.writable = not array.read_only and served is None
        storage = array.data_type.storage
        own = storage.newbyteorder("<" if byteorder == "little" else ">")
        self.file_dtype = own if served_dtype is None else served_dtype
        self.itemsize = self.file_dtype.itemsize
        self._convert = self.itemsize > 1 and not self.file_dtype.isnative

    @property
    def region(self) -> Box:
        if self._region is not None:
            return self._region
        return Box((0,) * len(self.array.shape), self.array.shape)

    @property
    def size(self) -> int:
        return self.region.size * self.itemsize

    @property
    def block_size(self) -> int:
        """STREAM_BLOCK, but for `data` of an array of small chunks: what the kernel's window
        would be (readahead_cost.kernel_window_kb, at the store's price of a request).
        Python's buffered reads read a whole block: 1 MiB for 1 KiB asked was 31,250 chunks
        of a canvas in 32 x 32 chunks."""
        if self._region is not None:
            return STREAM_BLOCK
        array = self.array
        free = FREE_REQUESTS if self.priced_in_requests else LOCAL_FREE_REQUESTS
        return min(STREAM_BLOCK, kernel_window_kb(tuple(array.shape), tuple(array.read_chunk_shape),
                                                  array.data_type.storage.itemsize, free) << 10)

    @property
    def resizable(self) -> bool:
        return self._resizer is not None and self.writable

    def resize(self, size: int, *, round_up: bool = False) -> None:
        """Make the file `size` bytes long by changing the array's first dimension: exactly
        (truncate), or to the smallest number of whole rows holding `size` bytes (a write
        past the end)."""
        shape = self.array.shape
        if self._resizer is None or not self.writable:
            raise FixedBytesError("the size of this file is fixed")
        if not shape:
            raise ResizeError("an array of rank 0 cannot be resized")
        row = self.itemsize * math.prod(shape[1:])
        if row == 0:
            if size:
                raise ResizeError("rows of this array hold no elements: it cannot grow")
            return
        rows, partial = divmod(size, row)
        if partial and not round_up:
            raise ResizeError(f"{size} bytes is not a whole number of {row}-byte rows")
        self._resizer((rows + (1 if partial else 0), *shape[1:]))

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
        raw = [self._file_bytes(part) for part in self.array.read_boxes(self.boxes(offset, size))]
        joined = raw[0] if len(raw) == 1 else np.concatenate(raw)
        skip = offset % self.itemsize
        return joined.data[skip : skip + size]

    def in_file_order(self, values: np.ndarray) -> memoryview:
        """The file's bytes, where `values` are all its region's elements (as the array
        gives them)."""
        return self._file_bytes(values).data

    def _file_bytes(self, values: np.ndarray) -> np.ndarray:
        # As bytes: some element types (bfloat16) export no buffer format, and concatenating
        # non-native arrays would swap them back to native order.
        return self._to_file_order(values).reshape(-1).view(np.uint8)

    def cached(self, offset: int, size: int) -> bool:
        """Whether bytes [offset, offset + size) are all in the cache (RegionArray.cached)."""
        size = max(0, min(size, self.size - offset))
        return self.array.cached(self.boxes(offset, size)) if size else True

    def write(self, offset: int, data: bytes | memoryview) -> int:
        if offset + len(data) > self.size and self.resizable:
            self.resize(offset + len(data), round_up=True)
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

    def readahead(self) -> Readahead:
        return Readahead(self, self)

    @property
    def row_bytes(self) -> int:
        """The bytes of one index of the first axis."""
        return math.prod(self.region.shape[1:]) * self.itemsize

    def slab_rows(self) -> int | None:
        """Rows per row of read chunks, when this file is the whole array as it is now (so a
        run of such rows, in the file's byte order, is a stream's buffer as it is); else None."""
        shape = self.array.shape
        if (self.region.stop != shape or any(self.region.start) or not shape or not self.row_bytes
                or self._served is not None):  # (streams fill buffers of the array's own type)
            return None
        return self.array.read_chunk_shape[0]

    @property
    def slab_bytes(self) -> int:
        return self.array.slab_bytes

    def row_requests(self) -> int:
        """The read chunks of one row of them (what a row of them costs the store)."""
        chunk = self.array.read_chunk_shape
        return math.prod(-(-n // c) for n, c in zip(self.region.shape[1:], chunk[1:], strict=True))

    def requests(self, offset: int, size: int) -> int:
        """The read chunks bytes [offset, offset + size) touch (what reading them costs)."""
        size = max(0, min(size, self.size - offset))
        return chunks_in(self.boxes(offset, size), self.array.read_chunk_shape) if size else 0

    def stream_rows(self, first: int, stop: int) -> Slab | None:
        """Start filling a buffer with rows [first, stop) of the array (clipped to it)."""
        shape = self.array.shape
        return self.array.stream(Box((min(first, shape[0]), *(0,) * (len(shape) - 1)),
                                     (min(stop, shape[0]), *shape[1:])), self.file_dtype)

    def flush(self) -> None:
        self.array.flush()

    def _to_file_order(self, values: np.ndarray) -> np.ndarray:
        if self._served is not None:
            return self._served(values)
        if self._convert:
            return values.astype(self.file_dtype)
        return np.ascontiguousarray(values)

    def _from_file_order(self, values: np.ndarray) -> np.ndarray:
        if self.array.data_type.kind == "bool":
            nonzero: np.ndarray = values.view(np.uint8) != 0
            return nonzero
        if self.array.data_type.sub_byte_bits is not None:
            return from_low_bits(values, self.array.data_type)
        converted: np.ndarray = values.astype(self.array.data_type.storage, copy=False)
        return converted


def _shift(index: Index, origin: Index) -> Index:
    return tuple(i + o for i, o in zip(index, origin, strict=True))
