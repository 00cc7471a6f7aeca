"""Where an array's elements are and what they mean, for the header views: voxel spacing and
origin, geotransform and CRS, no-data value, packing, band names and units; and the
neighbourhood they were found from (`Surroundings`). Pure: the tree reads the metadata and
the small coordinate arrays once per array; `cf_placement` turns CF/xarray conventions into a
`Placement` and `ome.ome_placement` does OME-Zarr. Every header view takes what it can
describe from the one `Placement`; the empty one (`NOWHERE`) leaves the headers as they are
without any of this metadata.

Nothing here guesses: coordinates that are not evenly spaced give no transform, values that
are not numbers give no value."""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cf_time import iso_times

__all__ = ["NOWHERE", "WGS84", "Axis", "Coordinate", "Placement", "SiblingReader", "Surroundings",
           "cf_placement", "geographic_axis", "regular_step"]

WGS84 = "EPSG:4326"
_LATITUDE_NAMES = {"lat", "latitude"}
_LONGITUDE_NAMES = {"lon", "long", "longitude"}
_RELATIVE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Axis:
    """What an image's metadata says of one axis (OME-Zarr's `axes`); None: not said."""

    name: str | None = None
    type: str | None = None  # "space", "time", "channel", ...
    unit: str | None = None  # of its spacing and origin: "micrometer", "second", ...


@dataclass(frozen=True)
class Placement:
    """Per-axis values are in the array's (C) axis order; None: not known."""

    spacing: tuple[float, ...] | None = None  # positive
    origin: tuple[float, ...] | None = None  # the first element's centre
    flipped: tuple[bool, ...] | None = None  # axes whose coordinates decrease
    geotransform: tuple[float, ...] | None = None  # GDAL's six numbers over the last two axes
    crs: str | None = None  # WKT, or "EPSG:4326"
    nodata: float | None = None  # in stored (packed) values; NaN allowed
    scale: float | None = None
    offset: float | None = None
    band_names: tuple[str, ...] | None = None  # one per element of the first axis (rank 3)
    units: str | None = None
    axes: tuple[Axis, ...] | None = None  # one per axis
    # (what the fields above were found from; not part of the placement's value)
    surroundings: Surroundings | None = field(default=None, compare=False)


NOWHERE = Placement()


@dataclass(frozen=True)
class Coordinate:
    """A 1-D coordinate array of one dimension (CF: a variable named as its dimension)."""

    name: str
    values: np.ndarray[Any, Any]
    attributes: Mapping[str, Any]


# (a sibling's name, at most this many bytes) -> its values, read whole; None: no such array,
# or a larger one
SiblingReader = Callable[[str, int], "np.ndarray[Any, Any] | None"]


def _no_siblings(name: str, max_bytes: int) -> np.ndarray[Any, Any] | None:
    return None


@dataclass(frozen=True)
class Surroundings:
    """The array's neighbourhood as it is stored, for the views that read more of it than
    `Placement`'s fields: its attributes, a coordinate array per axis, its group's attributes,
    and the small arrays beside it, read whole when a view asks. Format-free: what any of it
    means to a file format is that format's family's business (its stored headers, keywords,
    world coordinates)."""

    attributes: Mapping[str, Any]  # the array's
    coordinates: tuple[Coordinate | None, ...]  # one per axis (C order); None: none
    group_attributes: Mapping[str, Any]  # its group's (empty: none)
    dimension_names: tuple[str | None, ...] | None = None
    name: str = ""  # the array's, in its group ("": it has no group, being the root)
    sibling: SiblingReader = field(default=_no_siblings, compare=False)


def geographic_axis(coordinate: Coordinate) -> str | None:
    """"latitude" or "longitude" when the coordinate is one (by its CF attributes or name)."""
    return next((which for which in ("latitude", "longitude") if _is_axis(coordinate, which)), None)


def cf_placement(attributes: Mapping[str, Any], dtype: np.dtype[Any],
                 coordinates: Sequence[Coordinate | None], *,
                 grid_mapping: Mapping[str, Any] | None = None, stored_fill: object = None) -> Placement:
    """What CF attributes and coordinates say of an array. `coordinates` has one entry per
    axis; `grid_mapping` is the attributes of the variable the array's `grid_mapping` names;
    `stored_fill` the format's own fill value when it stands for `_FillValue` (xarray's v2)."""
    steps = [regular_step(c.values) if c is not None else None for c in coordinates]
    spacing, origin, flipped = _physical(steps)
    geotransform = _geotransform(steps) if len(steps) in (2, 3) else None
    crs = _crs(grid_mapping, coordinates[-2:]) if geotransform is not None else None
    return Placement(
        spacing=spacing, origin=origin, flipped=flipped, geotransform=geotransform, crs=crs,
        nodata=_nodata(attributes, dtype, stored_fill),
        scale=_finite(attributes.get("scale_factor")), offset=_finite(attributes.get("add_offset")),
        band_names=_band_names(coordinates[0]) if len(coordinates) == 3 and coordinates[0] else None,
        units=_text(attributes.get("units")),
    )


def regular_step(values: np.ndarray[Any, Any]) -> tuple[float, float] | None:
    """(first value, step) of evenly spaced numbers (to their precision), else None."""
    if values.ndim != 1 or len(values) < 2 or values.dtype.kind not in "iuf":
        return None
    numbers = values.astype(np.float64)
    if not np.isfinite(numbers).all():
        return None
    step = (numbers[-1] - numbers[0]) / (len(numbers) - 1)
    if step == 0:
        return None
    resolution = np.finfo(values.dtype).eps if values.dtype.kind == "f" else 0.0
    tolerance = _RELATIVE_TOLERANCE * abs(step) + 4 * resolution * float(np.abs(numbers).max())
    expected = numbers[0] + step * np.arange(len(numbers))
    if float(np.abs(numbers - expected).max()) > tolerance:
        return None
    return float(numbers[0]), float(step)


def _physical(steps: list[tuple[float, float] | None]) -> tuple[Any, Any, Any]:
    """ITK's spacing, origin and flips: axes without coordinates count elements from 0."""
    if all(s is None for s in steps):
        return None, None, None
    known = [s or (0.0, 1.0) for s in steps]
    return (tuple(abs(step) for _, step in known), tuple(first for first, _ in known),
            tuple(step < 0 for _, step in known))


def _geotransform(steps: list[tuple[float, float] | None]) -> tuple[float, ...] | None:
    """The transform of the cells' edges: x from the last axis, y from the one before (a
    south-up grid has a positive y step, which GDAL takes as it is)."""
    y, x = steps[-2], steps[-1]
    if x is None or y is None:
        return None
    return (x[0] - x[1] / 2, x[1], 0.0, y[0] - y[1] / 2, 0.0, y[1])


def _crs(grid_mapping: Mapping[str, Any] | None, yx: Sequence[Coordinate | None]) -> str | None:
    if grid_mapping is not None:
        for key in ("crs_wkt", "spatial_ref"):
            wkt = _text(grid_mapping.get(key))
            if wkt:
                return wkt
    y, x = yx
    if y is not None and x is not None and _is_axis(y, "latitude") and _is_axis(x, "longitude"):
        return WGS84
    return None


def _is_axis(coordinate: Coordinate, which: str) -> bool:
    attributes = coordinate.attributes
    names = _LATITUDE_NAMES if which == "latitude" else _LONGITUDE_NAMES
    units = {"latitude": "degrees_north", "longitude": "degrees_east"}[which]
    return (attributes.get("standard_name") == which or attributes.get("units") == units
            or coordinate.name.lower() in names)


def _nodata(attributes: Mapping[str, Any], dtype: np.dtype[Any], stored_fill: object) -> float | None:
    for key in ("_FillValue", "missing_value"):
        if key in attributes:
            value = fill_number(attributes[key])
            if value is not None:
                return value
    if stored_fill is not None:
        return fill_number(stored_fill)
    return None


def fill_number(value: object) -> float | None:
    """A CF fill value as JSON holds it: a number, a list of them (missing_value), the names
    zarr gives NaN and the infinities, or xarray's base64 of the value's bytes (v3)."""
    if isinstance(value, list):
        return fill_number(value[0]) if value else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    named = {"nan": math.nan, "infinity": math.inf, "-infinity": -math.inf}.get(value.lower())
    if named is not None:
        return named
    try:
        raw = base64.b64decode(value, validate=True)
    except ValueError:
        return None
    kinds = {8: "<f8", 4: "<f4", 2: "<f2"}
    return float(np.frombuffer(raw, kinds[len(raw)])[0]) if len(raw) in kinds else None


def _band_names(coordinate: Coordinate) -> tuple[str, ...] | None:
    values, attributes = coordinate.values, coordinate.attributes
    if values.ndim != 1:
        return None
    if values.dtype.kind == "M":
        return tuple(str(np.datetime_as_string(v, unit="s")) for v in values)
    if values.dtype.kind not in "iuf":
        return None
    units = _text(attributes.get("units"))
    if units and " since " in units:
        times = iso_times(values.tolist(), units, _text(attributes.get("calendar")))
        if times is not None:
            return tuple(times)
    text = [_number_text(v) for v in values.tolist()]
    return tuple(f"{t} {units}" for t in text) if units else tuple(text)


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 2**53 else repr(float(value))


def _finite(value: object) -> float | None:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
