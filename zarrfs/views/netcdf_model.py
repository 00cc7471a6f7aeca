"""The netCDF data model that `data.nc` (classic) and `data.h5` (netCDF-4) both write: its
element types, which names netCDF-C takes, and attributes typed as netCDF types them. Pure."""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from typing import Any

import numpy as np

NC_BYTE, NC_CHAR, NC_SHORT, NC_INT, NC_FLOAT, NC_DOUBLE = 1, 2, 3, 4, 5, 6
NC_UBYTE, NC_USHORT, NC_UINT, NC_INT64, NC_UINT64 = 7, 8, 9, 10, 11
# The element type of each, as stored (big-endian).
NC_DTYPES = {NC_BYTE: ">i1", NC_CHAR: "S1", NC_SHORT: ">i2", NC_INT: ">i4", NC_FLOAT: ">f4",
             NC_DOUBLE: ">f8", NC_UBYTE: ">u1", NC_USHORT: ">u2", NC_UINT: ">u4", NC_INT64: ">i8",
             NC_UINT64: ">u8"}
_BY_KIND = {(np.dtype(d).kind, np.dtype(d).itemsize): t for t, d in NC_DTYPES.items() if t != NC_CHAR}
CDF5_TYPES = frozenset({NC_UBYTE, NC_USHORT, NC_UINT, NC_INT64, NC_UINT64})
_INT_RANGES = ((NC_INT, np.iinfo(np.int32)), (NC_INT64, np.iinfo(np.int64)), (NC_UINT64, np.iinfo(np.uint64)))


def nc_type(dtype: np.dtype[Any]) -> int | None:
    """The type of a variable of elements of `dtype` (byte strings: char, one per byte), or
    None when the classic formats have none (float16, complex, records, ...)."""
    if dtype.kind == "S":
        return NC_CHAR
    if dtype.kind == "b":
        return NC_BYTE
    return _BY_KIND.get((dtype.kind, dtype.itemsize))


def valid_name(name: str) -> bool:
    """Whether netCDF-C takes `name` (its NC_check_name): a letter, digit, `_` or a non-ASCII
    character first, no `/` or control characters, no trailing space, NFC-normalised."""
    if not name or unicodedata.normalize("NFC", name) != name or name[-1].isspace():
        return False
    if name[0].isascii() and not (name[0].isalnum() or name[0] == "_"):
        return False
    return all(c != "/" and (not c.isascii() or 0x20 <= ord(c) < 0x7F) for c in name)


@dataclass(frozen=True)
class Attribute:
    name: str
    nc_type: int
    values: bytes  # big-endian, unpadded

    @property
    def count(self) -> int:
        return len(self.values) // np.dtype(NC_DTYPES[self.nc_type]).itemsize

    @classmethod
    def typed(cls, name: str, values: object, type_: int) -> Attribute:
        """Numbers (one or a list) as `type_`; text as char (UTF-8)."""
        if type_ == NC_CHAR:
            text = values if isinstance(values, str) else json.dumps(values)
            return cls(name, NC_CHAR, text.encode())
        return cls(name, type_, np.asarray(values).astype(NC_DTYPES[type_]).reshape(-1).tobytes())

    @classmethod
    def of(cls, name: str, value: object) -> Attribute:
        """A JSON attribute: text as char, booleans as byte, numbers (and lists of them) as
        int, int64, uint64 or double, whatever else as its JSON text."""
        values = value if isinstance(value, list) else [value]
        if isinstance(value, str):
            return cls.typed(name, value, NC_CHAR)
        type_ = _number_type(values) if values else None
        if type_ is None:
            return cls.typed(name, json.dumps(value), NC_CHAR)
        return cls.typed(name, values, type_)


def _number_type(values: list[Any]) -> int | None:
    if all(isinstance(v, bool) for v in values):
        return NC_BYTE
    if any(isinstance(v, bool) or not isinstance(v, int | float) for v in values):
        return None
    if any(isinstance(v, float) for v in values):
        return NC_DOUBLE
    for type_, info in _INT_RANGES:
        if all(info.min <= v <= info.max for v in values):
            return type_
    return None
