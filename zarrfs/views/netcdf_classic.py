"""What `data.nc` serves, in the classic formats older readers open (CDF-1/2), in place of the
types only CDF-5 has. Pure: element types and values in, element types out.

R's ncdf4 on common NetCDF-C builds, GDAL 3.6 and Octave open no CDF-5 file, and xarray
stores CF times (and every numpy default integer) as int64, so a CDF-5 `data.nc` of most
xarray datasets is one those readers cannot open. Each unsigned or 64-bit variable is
served instead as a classic type holding each of its values exactly:

- uint8 as short, uint16 as int, uint32 as double: every value of the type fits;
- int64 and uint64 as int when every value fits 32 bits (what xarray's own NetCDF-3 writer
  does), else as double when a double holds every value exactly (all within 2^53, and many
  beyond: nanosecond times of whole seconds), else not at all (the dataset needs CDF-5).
  Their values are read to choose (the caller keeps what was chosen); a value written
  since that the type chosen cannot hold is an error when read, never a rounded number.

Attributes of those types likewise (`classic_attribute`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import MetadataError
from ..grid import Box
from .files import RegionArray
from .netcdf import CDF5_TYPES, NC_DOUBLE, NC_DTYPES, NC_INT, NC_INT64, NC_UINT64, Attribute, nc_type

WIDENED: dict[np.dtype[Any], np.dtype[Any]] = {
    np.dtype("u1"): np.dtype(">i2"), np.dtype("u2"): np.dtype(">i4"), np.dtype("u4"): np.dtype(">f8")}
WIDE = frozenset({np.dtype("i8"), np.dtype("u8")})
_INT32 = np.iinfo(np.int32)
# 64-bit integer arrays up to this many elements (32 MiB) are read when the header is made, to
# choose their type: coordinates and most variables; larger ones are served as CDF-5.
SCANNED_ELEMENTS = 1 << 22


def needs_values(storage: np.dtype[Any]) -> bool:
    """Whether the classic type of elements of `storage` depends on their values."""
    return storage.newbyteorder("=") in WIDE


def classic_type(storage: np.dtype[Any], values: np.ndarray | None = None) -> np.dtype[Any] | None:
    """The big-endian classic type elements of `storage` are served as: the same type where
    the classic formats have it, a wider one (unsigned types), or the narrowest that holds
    each of `values` exactly (64-bit integers: `values` are all of them). None: none does."""
    native = storage.newbyteorder("=")
    if native in WIDENED:
        return WIDENED[native]
    if native not in WIDE:
        return storage.newbyteorder(">")
    if values is None:
        return None
    if values.size == 0 or (_INT32.min <= values.min() and values.max() <= _INT32.max):
        return np.dtype(">i4")
    return np.dtype(">f8") if _exact_as_double(values) else None


def exactly_as(values: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """`values` as `dtype`, which must hold each of them exactly (MetadataError when one is not:
    the values changed since the type was chosen)."""
    converted = values.astype(dtype)
    if dtype.kind == "f" and values.dtype.kind in "iu":
        exact = _exact_as_double(values)
    else:
        exact = bool(np.array_equal(converted, values))
    if not exact:
        raise MetadataError("", f"values of this array changed: {dtype.name} no longer holds them "
                                "exactly (open data.nc again for a type that does)")
    return converted


def classic_attribute(attribute: Attribute) -> Attribute:
    """A 64-bit integer attribute as int or double where that holds its values exactly;
    any other attribute as it is."""
    if attribute.nc_type not in (NC_INT64, NC_UINT64):
        return attribute
    values = np.frombuffer(attribute.values, NC_DTYPES[attribute.nc_type])
    found = classic_type(values.dtype, values)
    if found is None:
        return attribute
    type_ = NC_INT if found.kind == "i" else NC_DOUBLE
    return Attribute(attribute.name, type_, values.astype(NC_DTYPES[type_]).tobytes())


def _exact_as_double(values: np.ndarray) -> bool:
    """Whether every one of 64-bit integer `values` is a double exactly. (Those that round to
    beyond the type's range cannot be cast back; of them only int64's minimum, -2^63, is
    exact.)"""
    doubles = values.astype(np.float64)
    if values.dtype.kind == "u":
        return bool(np.all(doubles < 2.0**64)) and bool(np.array_equal(doubles.astype(np.uint64), values))
    inside = np.abs(doubles) < 2.0**63
    outside = values[~inside]
    return (bool(np.all(outside == np.iinfo(np.int64).min))
            and bool(np.array_equal(doubles[inside].astype(np.int64), values[inside])))


def served_type(storage: np.dtype[Any], shape: tuple[int, ...],
                array: Callable[[], RegionArray]) -> np.dtype[Any] | None:
    """`classic_type` of an array's elements where its own type is CDF-5's (else None: served
    as it is), reading them where it depends on them (arrays of up to `SCANNED_ELEMENTS`;
    larger ones: None, CDF-5)."""
    if nc_type(storage) not in CDF5_TYPES:
        return None
    if not needs_values(storage):
        return classic_type(storage)
    if math.prod(shape) > SCANNED_ELEMENTS:
        return None
    values = array().read_boxes([Box((0,) * len(shape), shape)])[0]
    return classic_type(storage, values)
