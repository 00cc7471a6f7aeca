"""What `data.nc` serves, in the classic formats older readers open (CDF-1/2), in place of the
types only CDF-5 has. Pure: element types and values in, element types out.

R's ncdf4 on common NetCDF-C builds, GDAL 3.6 and Octave open no CDF-5 file, and xarray
stores CF times (and every numpy default integer) as int64, so a CDF-5 `data.nc` of most
xarray datasets is one those readers cannot open. Each unsigned or 64-bit variable is
served instead as a classic type of the same or a larger size:

- uint8 as short, uint16 as int, uint32 as double: every value of the type fits;
- int64 and uint64 as double, which holds every value within 2^53 exactly, and many beyond
  (xarray's NaT, -2^63; nanosecond times of whole seconds). Whether it holds every value of
  an array is known only from its values (`exact_type`): the caller reads them when it can
  afford to, and serves the array as its own type (CDF-5) where one is not held. A value no
  double holds is never served rounded: reading it is an error (`exactly_as`).

The type chosen never depends on the values, only whether there is one: a file's size is
known from the arrays' metadata. Attributes of 64-bit types likewise (`classic_attribute`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import MetadataError
from ...grid import Box
from ..files import RegionArray
from ..netcdf_model import CDF5_TYPES, NC_DOUBLE, NC_DTYPES, NC_INT64, NC_UINT64, Attribute, nc_type

CLASSIC: dict[np.dtype[Any], np.dtype[Any]] = {
    np.dtype("u1"): np.dtype(">i2"), np.dtype("u2"): np.dtype(">i4"), np.dtype("u4"): np.dtype(">f8"),
    np.dtype("i8"): np.dtype(">f8"), np.dtype("u8"): np.dtype(">f8")}
# 64-bit integer arrays up to this many elements (32 MiB) are read to check that doubles hold
# their values (coordinates and most variables); larger ones are served as doubles unchecked.
SCANNED_ELEMENTS = 1 << 22


def served_type(storage: np.dtype[Any]) -> np.dtype[Any] | None:
    """The big-endian classic type elements of `storage` are served as where their own is
    CDF-5's, or None (their own type is classic, or has no classic stand-in)."""
    if nc_type(storage) not in CDF5_TYPES:
        return None
    return CLASSIC.get(storage.newbyteorder("="))


def needs_values(storage: np.dtype[Any]) -> bool:
    """Whether a classic stand-in for elements of `storage` may fail to hold some values."""
    served = served_type(storage)
    return served is not None and served.itemsize == storage.itemsize


def exact_type(storage: np.dtype[Any], shape: tuple[int, ...],
               array: Callable[[], RegionArray]) -> np.dtype[Any] | None:
    """`served_type`, checked against the array's values where they matter (64-bit integer
    arrays of up to `SCANNED_ELEMENTS`, read now): None when one of them is not held exactly."""
    served = served_type(storage)
    if served is None or not needs_values(storage) or math.prod(shape) > SCANNED_ELEMENTS:
        return served
    values = array().read_boxes([Box((0,) * len(shape), shape)])[0]
    return served if _exact_as_double(values) else None


def exactly_as(values: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """`values` as `dtype`, which must hold each of them exactly (MetadataError when one is not:
    the values changed since the type was chosen, or were not checked)."""
    converted = values.astype(dtype)
    if dtype.kind == "f" and values.dtype.kind in "iu":
        exact = _exact_as_double(values)
    else:
        exact = bool(np.array_equal(converted, values))
    if not exact:
        raise MetadataError("", f"a value of this array is not a {dtype.name} exactly: data.nc serves "
                                "its variable as one (open it again, or mount with -o nc_format=cdf5)")
    return converted


def classic_attribute(attribute: Attribute) -> Attribute:
    """A 64-bit integer attribute as double where that holds its values exactly; any other
    attribute as it is."""
    if attribute.nc_type not in (NC_INT64, NC_UINT64):
        return attribute
    values = np.frombuffer(attribute.values, NC_DTYPES[attribute.nc_type])
    if not _exact_as_double(values):
        return attribute
    return Attribute(attribute.name, NC_DOUBLE, values.astype(NC_DTYPES[NC_DOUBLE]).tobytes())


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
