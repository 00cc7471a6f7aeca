"""HDF5 variable-length strings as bytes: pure functions, no I/O.

A dataset of variable-length strings (NetCDF-4's NC_STRING) holds per element 16 bytes: the
string's length in bytes (u32), the address of a global heap collection and the object's
index in it (u32); the strings themselves are objects of global heap collections ("GCOL",
III.E of the File Format Specification). An empty string is an object of no bytes, as the
library writes it (address 0 reads as no string at all: ncdump shows NIL).
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

# Version 1 variable-length string, null-terminated padding, UTF-8, of 16-byte elements; its
# base type an unsigned byte, as the library (and netCDF-C's NC_STRING) writes it.
STRING_TYPE = (bytes([0x19, 0x01, 0x01, 0x00]) + struct.pack("<I", 16)
               + bytes([0x10, 0, 0, 0]) + struct.pack("<IHH", 1, 0, 8))
ELEMENT = np.dtype([("length", "<u4"), ("address", "<u8"), ("object", "<u4")])
MIN_COLLECTION = 4096  # (the least collection the library writes; it reads this much first)
_HEADER = 16  # (a collection's: signature, version, size; and an object's)
_MOST_OBJECTS = (1 << 16) - 1  # (an object's index is 16 bits; 0 is the free space)
# A collection is one entry of the library's metadata cache, at most 32 MiB: a collection
# is begun past this many bytes (a longer string gets one of its own).
_COLLECTION_BYTES = 1 << 20


_OBJECT = np.dtype([("index", "<u2"), ("references", "<u2"), ("reserved", "<u4"), ("size", "<u8")])
_PADDING = [bytes(n) for n in range(8)]


def collections(values: Sequence[bytes], room: int | None = None) -> tuple[bytes, np.ndarray]:
    """Global heap collections holding the `values`, one after another from offset 0, and each
    value's element (`ELEMENT`), its address relative to the first collection. A collection
    takes the values that fit in `_COLLECTION_BYTES` (at least one), at most `_MOST_OBJECTS`
    objects. `room` (values of at most so many bytes): each value, its object exactly its
    bytes, is followed by an object no element refers to that fills it out to `room`, so every
    value takes `_slot(room)` bytes and the collections' sizes follow from the count alone."""
    count = len(values)
    lengths = np.fromiter(map(len, values), np.int64, count)
    taken = _HEADER + _aligned(lengths) if room is None else np.full(count, _slot(room))
    step = 1 if room is None else 2  # (object numbers a value takes)
    ends = np.cumsum(taken)  # (where each value ends in its run)
    elements = np.zeros(count, ELEMENT)
    elements["length"] = lengths
    made: list[bytes] = []
    at = first = 0
    while first < count:
        before = int(ends[first - 1]) if first else 0
        fits = int(np.searchsorted(ends, before + _COLLECTION_BYTES - _HEADER, side="right"))
        last = min(max(fits, first + 1), first + _MOST_OBJECTS // step, count)
        made.append(_collection(values[first:last], lengths[first:last], int(ends[last - 1]) - before, room))
        elements["address"][first:last] = at
        elements["object"][first:last] = np.arange(1, step * (last - first) + 1, step)
        at += len(made[-1])
        first = last
    return b"".join(made), elements


def collections_size(count: int, room: int) -> int:
    """What `collections` makes of `count` values given `room` bytes each, in bytes (without
    making them)."""
    taken = _slot(room)
    per = min(max((_COLLECTION_BYTES - _HEADER) // taken, 1), _MOST_OBJECTS // 2)
    full, rest = divmod(count, per)

    def size(values: int) -> int:
        return max(MIN_COLLECTION, _HEADER + values * taken + _HEADER)

    return full * size(per) + (size(rest) if rest else 0)


def _slot(room: int) -> int:
    """The bytes a value given `room` takes: its object and the one filling it out."""
    return 2 * _HEADER + int(_aligned(room))


def _filler(room: int, length: Any) -> Any:
    """The bytes of the object filling out a value of `length` bytes (or of each of an array
    of lengths) to `room`."""
    return _aligned(room) - _aligned(length)


def _aligned(nbytes: Any) -> Any:
    """`nbytes` (an int or an array of them) rounded up to the 8 bytes objects are padded to."""
    return (nbytes + 7) // 8 * 8


def _collection(values: Sequence[bytes], lengths: np.ndarray, objects_size: int, room: int | None) -> bytes:
    """One collection: its header, the values as objects 1, 2, ... (each padded to 8 bytes;
    given `room`: 1, 3, ..., each followed by its filler, 2, 4, ...), then the free space
    (object 0), at least MIN_COLLECTION bytes in all."""
    used = _HEADER + objects_size
    size = max(MIN_COLLECTION, used + _HEADER)
    step = 1 if room is None else 2
    headers = np.zeros(step * len(values), _OBJECT)
    headers["index"] = np.arange(1, len(headers) + 1)
    headers["references"][::step] = 1
    headers["size"][::step] = lengths
    if room is not None:
        headers["size"][1::2] = _filler(room, lengths)
    rows = memoryview(headers.tobytes())
    objects = b"".join(itertools.chain.from_iterable(
        _object(rows, step * n, value, room) for n, value in enumerate(values)))
    free = struct.pack("<HHIQ", 0, 0, 0, size - used)
    body = b"GCOL" + bytes([1, 0, 0, 0]) + struct.pack("<Q", size) + objects + free
    return body + bytes(size - len(body))


def _object(rows: memoryview, row: int, value: bytes, room: int | None) -> tuple[bytes | memoryview, ...]:
    """A value's object (header `row` of `rows`), and its filler given `room`."""
    padding = _PADDING[-len(value) % 8]
    if room is None:
        return rows[16 * row:16 * row + 16], value, padding
    return (rows[16 * row:16 * row + 16], value, padding, rows[16 * row + 16:16 * row + 32],
            bytes(_filler(room, len(value))))


def placed(elements: np.ndarray, address: int) -> bytes:
    """The elements' bytes with their collections at `address`."""
    moved = elements.copy()
    moved["address"] += np.uint64(address)
    return moved.tobytes()
