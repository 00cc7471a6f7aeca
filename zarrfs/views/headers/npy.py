"""`data.npy`: the .npy header, then the bytes of `data`, so `np.load(p, mmap_mode=...)`
maps the array. The header follows the array's shape; writes into it are refused unless they
rewrite the same bytes (a flushed mmap writes whole pages, header included). The registry
serves every header followed by `data`'s bytes this way (`data.nii`, `data.mrc` too)."""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..files import STREAM_BLOCK, FileTooLargeError, FixedBytesError, RegionFile
from ..readahead import Readahead

Header = Callable[[], bytes | None]


class NpyFile:
    direct_io = False
    block_size = STREAM_BLOCK
    resizable = False

    def __init__(self, data: RegionFile, header: Header) -> None:
        self.data = data
        self._header = header

    def header(self) -> bytes:
        found = self._header()
        assert found is not None  # the tree offers the file only when there is a header
        return found

    @property
    def writable(self) -> bool:
        return self.data.writable

    @property
    def size(self) -> int:
        return len(self.header()) + self.data.size

    def read(self, offset: int, size: int) -> bytes | memoryview:
        header = self.header()
        head = header[offset : offset + size]
        start = max(offset - len(header), 0)
        rest = size - len(head)
        if rest <= 0:
            return head
        body = self.data.read(start, rest)
        return body if not head else head + bytes(body)

    def write(self, offset: int, data: bytes | memoryview) -> int:
        header = self.header()
        view = memoryview(data).cast("B")
        overlap = view[: max(0, len(header) - offset)]
        if bytes(overlap) != header[offset : offset + len(overlap)]:
            raise FixedBytesError("the header follows the array and cannot be written")
        body = view[len(overlap) :]
        if body and offset + len(view) > self.size:
            raise FileTooLargeError("the file cannot grow: write to data to append rows")
        written = self.data.write(offset + len(overlap) - len(header), body) if body else 0
        return len(overlap) + written

    def prefetch(self, offset: int, size: int) -> None:
        header = len(self.header())
        self.data.prefetch(max(offset - header, 0), size)

    def readahead(self) -> Readahead:
        return Readahead(self, self.data, lambda: len(self.header()))

    def flush(self) -> None:
        self.data.flush()

    def resize(self, size: int, *, round_up: bool = False) -> None:
        raise FixedBytesError("the file has the array's size")


# -- reading a .npy stream's header (arrays made by writing .npy files) -----------------------

NPY_MAGIC = b"\x93NUMPY"
_PREFIX_BYTES = {1: 10, 2: 12}  # magic, version, then the header's length in 2 or 4 bytes


class BadNpyHeader(ValueError):
    """Bytes that do not begin a .npy file numpy could load as a plain array."""


@dataclass(frozen=True)
class NpyHeader:
    length: int  # of the header, magic included: where the data begins
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    fortran_order: bool

    @property
    def data_bytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def npy_header_length(head: bytes) -> int | None:
    """Where the data of a .npy stream begins, from its first bytes (None: too few yet)."""
    if len(head) < len(NPY_MAGIC) + 2:
        if not NPY_MAGIC.startswith(head[: len(NPY_MAGIC)]):
            raise BadNpyHeader("not a .npy file (no magic string)")
        return None
    if not head.startswith(NPY_MAGIC) or head[6] not in _PREFIX_BYTES or head[7] != 0:
        raise BadNpyHeader("not a .npy file of version 1.0 or 2.0")
    prefix = _PREFIX_BYTES[head[6]]
    if len(head) < prefix:
        return None
    return prefix + int.from_bytes(head[8:prefix], "little")


def parse_npy_header(head: bytes) -> NpyHeader:
    """The header of a .npy stream whose first `npy_header_length` bytes are `head`."""
    length = npy_header_length(head)
    if length is None or len(head) < length:
        raise BadNpyHeader("the header is cut short")
    stream = io.BytesIO(head[:length])
    try:
        version = np.lib.format.read_magic(stream)
        formats = np.lib.format
        read = formats.read_array_header_1_0 if version == (1, 0) else formats.read_array_header_2_0
        shape, fortran, dtype = read(stream)
    except (ValueError, SyntaxError, TypeError) as e:
        raise BadNpyHeader(str(e)) from None
    if dtype.hasobject:
        raise BadNpyHeader(f"{dtype}: objects are not bytes")
    return NpyHeader(length, tuple(int(n) for n in shape), dtype, bool(fortran))
