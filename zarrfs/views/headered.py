"""A header, then the flat bytes of an array: `data.npy` (so `np.load(p, mmap_mode=...)` maps
the array), `data.nii` and `data.mrc`, each a family's header over `data`'s bytes. The header
follows the array's shape; writes into it are refused unless they rewrite the same bytes (a
flushed mmap writes whole pages, header included), and the bytes after it are `data`'s:
read ahead, and written, as `data` is."""

from __future__ import annotations

from collections.abc import Callable

from ..array import Readahead
from .files import STREAM_BLOCK, FileTooLargeError, FixedBytesError
from .region_file import RegionFile

Header = Callable[[], bytes | None]


class HeaderedFile:
    """The header `header()` gives, then the bytes of `data`."""

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
