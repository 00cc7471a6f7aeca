"""Element types `data.h5` holds as another HDF5 type, with the attributes that say what the
values are, as xarray writes them to netCDF-4: numpy times (`datetime64`, `timedelta64`) are
int64 counts of their unit (their stored bytes: chunks pass through), `units` "seconds since
1970-01-01" and `calendar` for instants, `units` and xarray's `dtype` mark for durations. NaT
is int64's least value, which xarray (pandas) reads back as NaT."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

_UNITS = {"ns": "nanoseconds", "us": "microseconds", "ms": "milliseconds", "s": "seconds",
          "m": "minutes", "h": "hours", "D": "days"}


def _time_unit(storage: np.dtype[Any]) -> str | None:
    """A time type's unit ("ns"), if CF has a name for it and it counts one unit a step."""
    if storage.kind not in "Mm":
        return None
    unit, count = np.datetime_data(storage)
    return unit if unit in _UNITS and count == 1 else None


def time_counts(storage: np.dtype[Any]) -> np.dtype[Any] | None:
    """int64 for a time type CF can name (its stored byte order), else None."""
    return None if _time_unit(storage) is None else np.dtype("i8").newbyteorder(storage.byteorder)


def time_attributes(storage: np.dtype[Any]) -> Mapping[str, str]:
    """The attributes xarray writes with a time variable's counts (none for other types)."""
    unit = _time_unit(storage)
    if unit is None:
        return {}
    if storage.kind == "M":
        return {"units": f"{_UNITS[unit]} since 1970-01-01", "calendar": "proleptic_gregorian"}
    return {"dtype": f"timedelta64[{unit}]", "units": _UNITS[unit]}
