"""NetCDF-4 dimensions in HDF5 (as netCDF-C writes them, so netCDF-C, h5netcdf and xarray
name a variable's dimensions): a dimension without a coordinate variable is an empty dataset
of its length, a dimension scale (`CLASS`) whose `NAME` says it is no variable; a variable
lists its dimensions' scales in `DIMENSION_LIST`, a variable-length sequence of object
references per dimension, the references kept in a global heap collection."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from . import hdf5_format as h5
from .hdf5_attrs import string_type

GLOBAL_HEAP_SIZE = 4096  # (the least collection the library reads)
NOT_A_VARIABLE = "This is a netCDF dimension but not a netCDF variable."
_REFERENCE = bytes([0x17, 0, 0, 0]) + struct.pack("<I", 8)  # (an object reference)
_REFERENCES = bytes([0x19, 0, 0, 0]) + struct.pack("<I", 16) + _REFERENCE  # (a sequence of them)
_FLOAT32 = h5.datatype(np.dtype(">f4")) or b""
_CONTIGUOUS_EMPTY = bytes([3, 1]) + struct.pack("<QQ", h5.UNDEFINED, 0)  # (never written: fill)


def _string_attribute(name: str, text: str) -> bytes:
    encoded = text.encode() + b"\0"
    return h5.message(h5.ATTRIBUTE, h5.attribute(name, string_type(len(encoded)), (), encoded))


def scale_header(length: int) -> bytes:
    """The object header of a dimension that is no variable: `length` floats never written."""
    name = f"{NOT_A_VARIABLE}{length:10d}"
    return h5.object_header([
        h5.message(h5.DATASPACE, h5.dataspace((length,))),
        h5.message(h5.DATATYPE, _FLOAT32, flags=1),
        h5.message(h5.FILL_VALUE, h5.fill_value(bytes(4)), flags=1),
        h5.message(h5.LAYOUT, _CONTIGUOUS_EMPTY),
        _string_attribute("CLASS", "DIMENSION_SCALE"),
        _string_attribute("NAME", name),
    ])


def global_heap(references: Sequence[int]) -> bytes:
    """A collection holding one object reference per address, objects 1, 2, ... in order,
    the rest free space."""
    objects = b"".join(struct.pack("<HHIQQ", number, 1, 0, 8, address)
                       for number, address in enumerate(references, start=1))
    used = 16 + len(objects)
    free = struct.pack("<HHIQ", 0, 0, 0, GLOBAL_HEAP_SIZE - used)
    body = b"GCOL" + bytes([1, 0, 0, 0]) + struct.pack("<Q", GLOBAL_HEAP_SIZE) + objects + free
    return body + bytes(GLOBAL_HEAP_SIZE - len(body))


def dimension_list(heap_at: int, first: int, rank: int) -> bytes:
    """`DIMENSION_LIST`: dimension i's scale is object `first + i` of the collection at
    `heap_at`."""
    values = b"".join(struct.pack("<IQI", 1, heap_at, first + i) for i in range(rank))
    return h5.message(h5.ATTRIBUTE, h5.attribute("DIMENSION_LIST", _REFERENCES, (rank,), values))
