"""NetCDF-4 dimensions in HDF5 (as netCDF-C writes them, so netCDF-C, h5netcdf and xarray
name a variable's dimensions): a dimension without a coordinate variable is an empty dataset
of its length, a dimension scale (`CLASS`) whose `NAME` says it is no variable; a variable
lists its dimensions' scales in `DIMENSION_LIST`, a variable-length sequence of object
references per dimension, the references kept in a global heap collection. A scale lists the
variables attached to it in `REFERENCE_LIST` (a reference and a dimension number each), as
the library's H5DS does; a coordinate variable (a 1-D variable named as its dimension) is
itself its dimension's scale."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from . import structures as h5
from .attributes import text_type

GLOBAL_HEAP_SIZE = 4096  # (the least collection the library reads)
NOT_A_VARIABLE = "This is a netCDF dimension but not a netCDF variable."
_REFERENCE = bytes([0x17, 0, 0, 0]) + struct.pack("<I", 8)  # (an object reference)
_REFERENCES = bytes([0x19, 0, 0, 0]) + struct.pack("<I", 16) + _REFERENCE  # (a sequence of them)
_FLOAT32 = h5.datatype(np.dtype(">f4")) or b""
_CONTIGUOUS_EMPTY = bytes([3, 1]) + struct.pack("<QQ", h5.UNDEFINED, 0)  # (never written: fill)
# REFERENCE_LIST's element, as H5DS makes it: {dataset: object reference, dimension: int32} in
# 16 bytes (a compound of version 3, two members, each name then its offset in one byte).
_ATTACHED = (bytes([0x36, 2, 0, 0]) + struct.pack("<I", 16)
             + b"dataset\0" + bytes([0]) + bytes([0x37, 0, 0, 0]) + struct.pack("<I", 8)
             + b"dimension\0" + bytes([8]) + bytes([0x30, 0x08, 0, 0]) + struct.pack("<IHH", 4, 0, 32))
Attached = tuple[int, int]  # (a variable's object header address, which of its dimensions)


def _string_attribute(name: str, text: str) -> bytes:
    encoded = text.encode() + b"\0"
    return h5.message(h5.ATTRIBUTE, h5.attribute(name, text_type(encoded), (), encoded))


def scale_header(length: int, attached: Sequence[Attached]) -> bytes:
    """The object header of a dimension that is no variable: `length` floats never written."""
    return h5.object_header([
        h5.message(h5.DATASPACE, h5.dataspace((length,))),
        h5.message(h5.DATATYPE, _FLOAT32, flags=1),
        h5.message(h5.FILL_VALUE, h5.fill_value(bytes(4)), flags=1),
        h5.message(h5.LAYOUT, _CONTIGUOUS_EMPTY),
        *scale_attributes(f"{NOT_A_VARIABLE}{length:10d}", attached),
    ])


def scale_attributes(name: str, attached: Sequence[Attached]) -> list[bytes]:
    """What makes a dataset a dimension scale named `name` (a coordinate variable's: its own
    name), with the variables attached to it."""
    made = [_string_attribute("CLASS", "DIMENSION_SCALE"), _string_attribute("NAME", name)]
    if attached:
        values = b"".join(struct.pack("<QiI", address, dimension, 0) for address, dimension in attached)
        made.append(h5.message(h5.ATTRIBUTE, h5.attribute("REFERENCE_LIST", _ATTACHED, (len(attached),),
                                                          values)))
    return made


def global_heap_size(count: int) -> int:
    """The bytes of a collection of `count` references (24 each, and room for its free space)."""
    return max(GLOBAL_HEAP_SIZE, -(-(16 + 24 * count + 16) // GLOBAL_HEAP_SIZE) * GLOBAL_HEAP_SIZE)


def global_heap(references: Sequence[int]) -> bytes:
    """A collection holding one object reference per address, objects 1, 2, ... in order,
    the rest free space."""
    size = global_heap_size(len(references))
    objects = b"".join(struct.pack("<HHIQQ", number, 1, 0, 8, address)
                       for number, address in enumerate(references, start=1))
    used = 16 + len(objects)
    free = struct.pack("<HHIQ", 0, 0, 0, size - used)
    body = b"GCOL" + bytes([1, 0, 0, 0]) + struct.pack("<Q", size) + objects + free
    return body + bytes(size - len(body))


def dimension_list(heap_at: int, first: int, rank: int) -> bytes:
    """`DIMENSION_LIST`: dimension i's scale is object `first + i` of the collection at
    `heap_at`."""
    values = b"".join(struct.pack("<IQI", 1, heap_at, first + i) for i in range(rank))
    return h5.message(h5.ATTRIBUTE, h5.attribute("DIMENSION_LIST", _REFERENCES, (rank,), values))
