"""HDF5 variable-length strings as bytes: pure functions, no I/O.

A dataset of variable-length strings (NetCDF-4's NC_STRING) holds per element 16 bytes: the
string's length in bytes (u32), the address of a global heap collection and the object's
index in it (u32); the strings themselves are objects of global heap collections ("GCOL",
III.E of the File Format Specification). An empty string is an object of no bytes, as the
library writes it (address 0 reads as no string at all: ncdump shows NIL).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

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


def _padded(length: int) -> int:
    return -(-length // 8) * 8


def collections(values: Sequence[bytes]) -> tuple[bytes, np.ndarray]:
    """Global heap collections holding the `values`, one after another from offset 0, and each
    value's element (`ELEMENT`), its address relative to the first collection."""
    elements = np.zeros(len(values), ELEMENT)
    out = bytearray()
    objects: list[bytes] = []
    used = _HEADER
    at = 0

    def close() -> None:
        nonlocal used
        size = max(MIN_COLLECTION, used + _HEADER)  # (and the free space's object, 0)
        free = struct.pack("<HHIQ", 0, 0, 0, size - used)
        body = b"GCOL" + bytes([1, 0, 0, 0]) + struct.pack("<Q", size) + b"".join(objects) + free
        out.extend(body + bytes(size - len(body)))
        objects.clear()
        used = _HEADER

    for number, value in enumerate(values):
        need = _HEADER + _padded(len(value))
        if objects and (len(objects) == _MOST_OBJECTS or used + need > _COLLECTION_BYTES):
            close()
        if not objects:
            at = len(out)
        objects.append(struct.pack("<HHIQ", len(objects) + 1, 1, 0, len(value))
                       + value + bytes(_padded(len(value)) - len(value)))
        elements[number] = (len(value), at, len(objects))
        used += need
    if objects:
        close()
    return bytes(out), elements


def placed(elements: np.ndarray, address: int) -> bytes:
    """The elements' bytes with their collections at `address`."""
    moved = elements.copy()
    moved["address"] += np.uint64(address)
    return moved.tobytes()
