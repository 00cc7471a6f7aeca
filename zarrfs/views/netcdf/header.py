"""`data.nc`: a group as a NetCDF classic file, from descriptions of its variables. Pure: the
header's bytes and the byte-range math (where each variable's bytes lie, which variables a
read touches); the bytes themselves are each array's flat big-endian view, served elsewhere.

CDF-2 (64-bit offsets) where it can hold the file, CDF-5 where a type (unsigned, 64-bit
integers) or a variable over 4 GiB needs it. No record (unlimited) dimension: every variable's
bytes lie at its `begin`, padded to 4 bytes, one after the other after the header. Format:
https://docs.unidata.ucar.edu/netcdf-c/current/file_format_specifications.html
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..netcdf_model import CDF5_TYPES, Attribute

# A CDF-2 variable's size is a 32-bit field (the 4 GiB - 1 of the last variable's escape aside).
CDF2_MAX_VSIZE = (1 << 32) - 4
# Its lengths are 32-bit INTs, signed in the specification (netCDF-C reads them unsigned).
CDF2_MAX_LENGTH = (1 << 31) - 1
_DIMENSION_TAG, _VARIABLE_TAG, _ATTRIBUTE_TAG = 10, 11, 12


@dataclass(frozen=True)
class Variable:
    name: str
    dimensions: tuple[str, ...]
    nc_type: int
    attributes: tuple[Attribute, ...]
    nbytes: int  # of its data, unpadded


@dataclass(frozen=True)
class NcDataset:
    dimensions: tuple[tuple[str, int], ...]  # name, length (> 0)
    variables: tuple[Variable, ...]
    attributes: tuple[Attribute, ...]

    @property
    def cdf5(self) -> bool:
        attributes = [*self.attributes, *(a for v in self.variables for a in v.attributes)]
        return (any(v.nc_type in CDF5_TYPES or _padded(v.nbytes) > CDF2_MAX_VSIZE for v in self.variables)
                or any(a.nc_type in CDF5_TYPES for a in attributes)
                or any(length > CDF2_MAX_LENGTH for _, length in self.dimensions))


# -- the file -----------------------------------------------------------------------------------


class NcPiece(NamedTuple):
    """Bytes [start, stop) of the header (variable None) or of a variable's padded bytes
    (past its `nbytes`: padding, zeros)."""

    variable: int | None
    start: int
    stop: int


class NcLayout:
    """Where everything lies in the file of an `NcDataset`."""

    def __init__(self, dataset: NcDataset) -> None:
        self.dataset = dataset
        self.version = 5 if dataset.cdf5 else 2
        header_size = len(self._header([0] * len(dataset.variables)))
        ends = list(itertools.accumulate((_padded(v.nbytes) for v in dataset.variables), initial=header_size))
        self.begins = ends[:-1]
        self.header = self._header(self.begins)
        self.size = ends[-1]

    def pieces(self, offset: int, size: int) -> list[NcPiece]:
        """What bytes [offset, offset + size) of the file are (clipped to its end), in order."""
        end = min(offset + size, self.size)
        found = []
        if offset < len(self.header):
            found.append(NcPiece(None, offset, min(end, len(self.header))))
        index = max(bisect.bisect_right(self.begins, offset) - 1, 0)
        for i in range(index, len(self.begins)):
            begin = self.begins[i]
            if begin >= end:
                break
            stop = begin + _padded(self.dataset.variables[i].nbytes)
            if stop > offset:
                found.append(NcPiece(i, max(offset, begin) - begin, min(end, stop) - begin))
        return found

    def _header(self, begins: Sequence[int]) -> bytes:
        count = ">i8" if self.version == 5 else ">u4"  # (NON_NEG: netCDF-C reads CDF-2's unsigned)
        data = self.dataset
        dims = {name: i for i, (name, _) in enumerate(data.dimensions)}
        out = [b"CDF" + bytes([self.version]), _int(0, count)]  # (numrecs: no record dimension)
        dimensions = [_name(name, count) + _int(length, count) for name, length in data.dimensions]
        out += _list(_DIMENSION_TAG, dimensions, count)
        out += _attributes(data.attributes, count)
        variables = []
        for variable, begin in zip(data.variables, begins, strict=True):
            parts = [_name(variable.name, count), _int(len(variable.dimensions), count),
                     *(_int(dims[d], count) for d in variable.dimensions),
                     *_attributes(variable.attributes, count), _int(variable.nc_type, ">i4"),
                     _int(_padded(variable.nbytes), count),  # (CDF-2's never pass CDF2_MAX_VSIZE)
                     _int(begin, ">i8")]
            variables.append(b"".join(parts))
        out += _list(_VARIABLE_TAG, variables, count)
        return b"".join(out)


def _attributes(attributes: Sequence[Attribute], count: str) -> list[bytes]:
    return _list(_ATTRIBUTE_TAG, [_name(a.name, count) + _int(a.nc_type, ">i4") + _int(a.count, count)
                                  + _pad(a.values) for a in attributes], count)


def _list(tag: int, items: list[bytes], count: str) -> list[bytes]:
    """A tagged list; an empty one is ABSENT (two zeros)."""
    return [_int(tag if items else 0, ">i4"), _int(len(items), count), *items]


def _name(name: str, count: str) -> bytes:
    encoded = name.encode()
    return _int(len(encoded), count) + _pad(encoded)


def _int(value: int, dtype: str) -> bytes:
    return np.array(value, dtype=dtype).tobytes()


def _pad(data: bytes) -> bytes:
    return data + bytes(-len(data) % 4)


def _padded(nbytes: int) -> int:
    return nbytes + -nbytes % 4
