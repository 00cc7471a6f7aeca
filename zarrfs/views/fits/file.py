"""`data.fits`: the primary header, then the array's elements in big-endian order, then zeros
to a whole block of 2880 bytes. Made as it is read, with no copy of the array: the elements are
`data`'s flat view in big-endian order (`region_file.RegionFile`), read ahead in slabs as `data` is;
for the types FITS stores as their twin of the other sign (BZERO: uint16 as int16, int8 as
uint8, ...) each element's top bit is flipped, in a slab once it is filled (on the worker that
waits for it: no copy, and never on the event loop) and in a read through the cache in the copy
that read makes. Read-only."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

import numpy as np

from ...array import Ahead, Readahead, Reading, Slab, Streaming
from ..files import ReadOnlyFile, RegionArray
from ..region_file import RegionFile
from .cards import padding
from .header import stored_as_twin

__all__ = ["FitsFile", "fits_file"]

def fits_file(data: RegionFile, header: Callable[[], bytes | None]) -> FitsFile:
    """The file over `data`'s array (whatever `data`'s own byte order), its header as it is now
    (there is one: the tree offers the file only then)."""
    array, remote = data.array, data.priced_in_requests
    twin = stored_as_twin(array.data_type.storage)

    def made() -> bytes:
        found = header()
        assert found is not None
        return found

    return FitsFile(TwinFile(array, remote=remote) if twin else RegionFile(array, None, "big", remote=remote),
                    made)


class FitsFile(ReadOnlyFile):
    direct_io = False

    def __init__(self, elements: RegionFile, header: Callable[[], bytes]) -> None:
        self.elements = elements
        self.header = header  # (its bytes for the array's shape now)

    @property
    def size(self) -> int:
        return len(self.header()) + self.elements.size + padding(self.elements.size)

    def read(self, offset: int, size: int) -> bytes | memoryview:
        header = self.header()
        end = min(offset + size, self.size)
        elements_end = len(header) + self.elements.size
        if offset >= end:
            return b""
        parts: list[bytes | memoryview] = [header[offset:end]] if offset < len(header) else []
        if offset < elements_end and end > len(header):
            start = max(offset, len(header))
            parts.append(self.elements.read(start - len(header), min(end, elements_end) - start))
        if end > elements_end:
            parts.append(bytes(end - max(offset, elements_end)))
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def prefetch(self, offset: int, size: int) -> None:
        self.elements.prefetch(max(offset - len(self.header()), 0), size)

    def readahead(self) -> Reading:
        return PaddedReading(self, Readahead(self, self.elements, lambda: len(self.header())))


class PaddedReading:
    """The reading ahead of the header and the elements (`Readahead`, which would end the file
    where the elements end), and the zeros after them."""

    def __init__(self, file: FitsFile, elements: Streaming) -> None:
        self._file = file
        self._elements = elements

    def ready(self, offset: int, size: int) -> bytes | memoryview | None:
        return self._padded(self._elements.ready, offset, size)

    def read(self, offset: int, size: int) -> bytes | memoryview:
        found = self._padded(self._elements.read, offset, size)
        assert found is not None
        return found

    def close(self) -> None:
        self._elements.close()

    @property
    def reader_end(self) -> int:
        return self._elements.reader_end

    def take_ahead(self) -> list[Ahead]:
        return self._elements.take_ahead()

    def _padded(self, reading: Callable[[int, int], bytes | memoryview | None], offset: int,
                size: int) -> bytes | memoryview | None:
        padding_start = len(self._file.header()) + self._file.elements.size
        if offset + size <= padding_start:
            return reading(offset, size)
        if offset >= padding_start:
            return self._file.read(offset, size)
        head = reading(offset, padding_start - offset)
        zeros = min(offset + size, self._file.size) - padding_start
        return None if head is None else bytes(head) + bytes(zeros)


class TwinFile(RegionFile):
    """The array's elements big-endian, each as its twin of the other sign: top bit flipped."""

    def __init__(self, array: RegionArray, *, remote: bool) -> None:
        super().__init__(array, None, "big", remote=remote)
        self.writable = False

    def read(self, offset: int, size: int) -> memoryview:
        flipped = np.frombuffer(super().read(offset, size), np.uint8).copy()
        flipped[-offset % self.itemsize :: self.itemsize] ^= 0x80
        return flipped.data

    def stream_rows(self, first: int, stop: int) -> Slab | None:
        stream = super().stream_rows(first, stop)
        return None if stream is None else TwinSlab(stream, self.itemsize)


class TwinSlab:
    """A slab of big-endian elements whose top bits are flipped once it is filled, by the first
    reader that waits for it: until then it is not done (the reader waits, on a worker)."""

    def __init__(self, slab: Slab, itemsize: int) -> None:
        self._slab = slab
        self._mask = np.array(int.from_bytes(b"\x80".ljust(itemsize, b"\0"), sys.byteorder),
                              dtype=f"u{itemsize}")
        self._flipped = False
        self._closed = False
        self._lock = threading.Lock()  # (a flip and a close: the buffer is given back on close)

    @property
    def done(self) -> bool:
        return self._flipped and self._slab.done

    @property
    def current(self) -> bool:
        return self._flipped and self._slab.current

    def wait(self) -> bool:
        if self._slab.wait():
            self._flip()
        return self.current

    def piece(self, start: int, stop: int) -> memoryview | None:
        return self._slab.piece(start, stop) if self._flipped else None

    def pin(self) -> bool:
        return self._slab.pin()

    def unpin(self) -> None:
        self._slab.unpin()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._slab.close()

    def _flip(self) -> None:
        with self._lock:
            whole = None if self._flipped or self._closed else self._slab.piece(0, sys.maxsize)
            if whole is not None:
                elements = np.frombuffer(whole, self._mask.dtype)
                np.bitwise_xor(elements, self._mask, out=elements)
                self._flipped = True
