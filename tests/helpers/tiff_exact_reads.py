"""The byte ranges a TIFF reader reads with exact lengths to learn a file's header, as geotiff.js
2.1.3 reads them (`GeoTIFF.parseFileDirectoryAt`): the file's first KiB; at each IFD a first
slice of a KiB (4048 bytes in a BigTIFF), then, where the IFD is longer, the IFD itself (the
entry count, the entries and the next IFD's offset); each tag's values that lie outside its
entry, at their offset with their exact length. IFDs are followed as chained and as SubIFDs."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

FIRST_SLICE = 1024  # (the file's first read, and an IFD's first read in a classic TIFF)
BIG_FIRST_SLICE = 4048  # (an IFD's first read in a BigTIFF)
_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 13: 4,
          16: 8, 17: 8, 18: 8}  # (bytes of one value of each tag type)
_SUB_IFDS = 330


@dataclass(frozen=True)
class ExactRead:
    start: int
    length: int
    what: str

    @property
    def end(self) -> int:
        return self.start + self.length


def exact_reads(read: Callable[[int, int], bytes]) -> list[ExactRead]:
    """Every exact-length read of the header of the file `read` reads ([offset, offset + size))."""
    head = read(0, 16)
    order = "<" if head[:2] == b"II" else ">"
    big = struct.unpack(f"{order}H", head[2:4])[0] == 43
    pointer = "Q" if big else "I"
    first = struct.unpack(f"{order}{pointer}", head[8:16] if big else head[4:8])[0]
    found = [ExactRead(0, FIRST_SLICE, "file header")]
    waiting, seen = [first], set()
    while waiting:
        at = waiting.pop(0)
        if at == 0 or at in seen:
            continue
        seen.add(at)
        nexts, reads = _ifd_reads(read, at, order, big)
        waiting += nexts
        found += reads
    return found


def _ifd_reads(read: Callable[[int, int], bytes], at: int, order: str,
               big: bool) -> tuple[list[int], list[ExactRead]]:
    """The reads of the IFD at `at`, and the IFDs it points to (the next, its SubIFDs)."""
    count_format, entry_size, pointer = ("Q", 20, "Q") if big else ("H", 12, "I")
    count = struct.unpack(f"{order}{count_format}", read(at, 8 if big else 2))[0]
    size = (8 if big else 2) + count * entry_size + (8 if big else 4)
    entries = read(at, size)
    reads = [ExactRead(at, BIG_FIRST_SLICE if big else FIRST_SLICE, f"first slice of IFD {at}")]
    if size > reads[0].length:
        reads.append(ExactRead(at, size, f"IFD {at}"))
    nexts = [struct.unpack(f"{order}{pointer}", entries[size - (8 if big else 4):])[0]]
    for number in range(count):
        entry = entries[(8 if big else 2) + number * entry_size:][:entry_size]
        code, kind = struct.unpack(f"{order}HH", entry[:4])
        values = struct.unpack(f"{order}{pointer}", entry[4 : 12 if big else 8])[0]
        length = _SIZES.get(kind, 1) * values
        field = entry[12:] if big else entry[8:]
        if length > len(field):
            where = struct.unpack(f"{order}{pointer}", field)[0]
            reads.append(ExactRead(where, length, f"tag {code} of IFD {at}"))
            field = read(where, length) if code == _SUB_IFDS else field
        if code == _SUB_IFDS:
            nexts += list(struct.unpack(f"{order}{values}{pointer}", field[: values * (8 if big else 4)]))
    return nexts, reads
