"""XRADIO's sky images in FITS WCS, as xradio's own FITS writer (and CASA's exportfits) says
them: a SKY array of dimensions (time, frequency, polarization, l, m), each a 1-D coordinate
beside it, and `coordinate_system_info` in the group's attributes (xradio.image's schema).

- l and m, the projection plane's coordinates in radians (l towards the east), with the
  reference direction, the projection, the native pole, the rotation (PCi_j) and the
  projection's parameters (PVi_m) of `coordinate_system_info`: RA/DEC (FK4, FK5, ICRS) or
  GLON/GLAT (galactic) in degrees, the reference pixel where l and m are 0;
- polarization: STOKES, where the labels' FITS codes are evenly spaced (I Q U V, RR LL RL LR,
  ...; xradio's writer reorders the planes where they are not, which a view cannot);
- frequency: FREQ in Hz, SPECSYS from its frame, RESTFRQ;
- time: TIME in days from MJD 0 (MJDREF), TIMESYS from its scale, and MJD-OBS and DATE-OBS.

An axis of one element has no step: CDELT 1 (any would do; the one pixel's value is exact).
Anything missing or malformed leaves its axis without WCS, never guessed.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..placement import Coordinate, Surroundings
from .cards import Value
from .world import World, WorldAxis, combined, evenly_spaced

__all__ = ["sky_world"]

_CELESTIAL = {"fk5": ("RA---", "DEC--"), "fk4": ("RA---", "DEC--"), "icrs": ("RA---", "DEC--"),
              "galactic": ("GLON-", "GLAT-")}
_EQUINOX = {"fk5": 2000.0, "fk4": 1950.0}
_STOKES = {"I": 1, "Q": 2, "U": 3, "V": 4, "RR": -1, "LL": -2, "RL": -3, "LR": -4,
           "XX": -5, "YY": -6, "XY": -7, "YX": -8}
_SPECSYS = {"REST": "SOURCE", "LSRK": "LSRK", "LSRD": "LSRD", "BARY": "BARYCENT", "GEO": "GEOCENTR",
            "TOPO": "TOPOCENT", "GALACTO": "GALACTOC", "LGROUP": "LOCALGRP", "CMB": "CMBDIPOL"}
_HERTZ = {"Hz": 1.0, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9}
_DEGREES = {"rad": math.degrees(1.0), "deg": 1.0}
_TIME_SCALES = {"UTC", "TAI", "TT", "TDB", "TCG", "TCB", "UT1"}
_PROJECTION = re.compile(r"[A-Z0-9]{3}")
_MJD_ZERO = np.datetime64("1858-11-17T00:00:00", "ms")


def sky_world(around: Surroundings) -> World | None:
    """The world of an XRADIO sky image (None: the array is none)."""
    info = around.group_attributes.get("coordinate_system_info")
    if not isinstance(info, Mapping):
        return None
    axes = {c.name: (axis, c) for axis, c in enumerate(around.coordinates) if c is not None}
    return combined([_celestial(info, axes), _stokes(axes.get("polarization")),
                     _spectral(axes.get("frequency")), _time(axes.get("time"))])


def _celestial(info: Mapping[str, Any], axes: Mapping[str, tuple[int, Coordinate]]) -> World | None:
    reference = _measure(info.get("reference_direction"))
    if reference is None or "l" not in axes or "m" not in axes:
        return None
    frame = str(reference[1].get("frame", "")).lower()
    projection = str(info.get("projection", "")).strip().upper()
    direction = _degrees(reference)
    (east, l_values), (north, m_values) = axes["l"], axes["m"]
    l_step, m_step = evenly_spaced(l_values), evenly_spaced(m_values)
    if (frame not in _CELESTIAL or not _PROJECTION.fullmatch(projection) or direction is None
            or len(direction) != 2 or l_step is None or m_step is None):
        return None
    longitude, latitude = _CELESTIAL[frame]
    found = {east: _plane_axis(longitude + projection, direction[0], l_step),
             north: _plane_axis(latitude + projection, direction[1], m_step)}
    return World(found, _rotation(info, (east, north)), _parameters(info, projection, north),
                 _frame_keywords(info, frame, reference[1]))


def _plane_axis(ctype: str, reference: float, first_step: tuple[float, float]) -> WorldAxis:
    """The axis of l or m (radians in the projection's plane from the reference direction,
    which is where they are 0)."""
    first, step = first_step
    return WorldAxis(ctype, reference, math.degrees(step), 1.0 - first / step, "deg")


def _frame_keywords(info: Mapping[str, Any], frame: str, attributes: Mapping[str, Any]) -> tuple[
        tuple[str, Value], ...]:
    keywords: list[tuple[str, Value]] = []
    if frame != "galactic":
        keywords.append(("RADESYS", frame.upper()))
    if frame in _EQUINOX:
        equinox = _year(attributes.get("equinox"))
        keywords.append(("EQUINOX", _EQUINOX[frame] if equinox is None else equinox))
    pole = _degrees(_measure(info.get("native_pole_direction")), default="rad")
    if pole is not None and len(pole) == 2:
        keywords += [("LONPOLE", pole[0]), ("LATPOLE", pole[1])]
    return tuple(keywords)


def _rotation(info: Mapping[str, Any], lm: tuple[int, int]) -> dict[tuple[int, int], float]:
    matrix = np.asarray(info.get("pixel_coordinate_transformation_matrix", np.eye(2)), dtype=object)
    if matrix.shape != (2, 2) or not all(_number(v) is not None for v in matrix.flat):
        return {}
    values = np.array(matrix, dtype=np.float64)
    if np.array_equal(values, np.eye(2)):
        return {}
    return {(lm[i], lm[j]): float(values[i, j]) for i in range(2) for j in range(2)}


def _parameters(info: Mapping[str, Any], projection: str, latitude: int) -> dict[tuple[int, int], float]:
    """PVi_m of the latitude axis, from 1 (from 0 for ZPN, whose polynomial starts there)."""
    values = info.get("projection_parameters")
    numbers = [_number(v) for v in values] if isinstance(values, list) else []
    if not numbers or None in numbers or not any(numbers):
        return {}
    first = 0 if projection == "ZPN" else 1
    return {(latitude, m): float(v or 0.0) for m, v in enumerate(numbers, start=first)}


def _stokes(entry: tuple[int, Coordinate] | None) -> World | None:
    if entry is None or entry[1].values.dtype.kind not in "US":
        return None
    labels = [v.decode() if isinstance(v, bytes) else str(v) for v in entry[1].values.tolist()]
    codes = [_STOKES[label] for label in labels if label in _STOKES]
    steps = {b - a for a, b in itertools.pairwise(codes)}
    if not codes or len(codes) != len(labels) or len(steps) > 1 or 0 in steps:
        return None
    return World({entry[0]: WorldAxis("STOKES", float(codes[0]), float(steps.pop() if steps else 1))})


def _spectral(entry: tuple[int, Coordinate] | None) -> World | None:
    step = evenly_spaced(entry[1]) if entry is not None else None
    units = entry[1].attributes.get("units", "Hz") if entry is not None else None
    if entry is None or step is None or units not in _HERTZ:
        return None
    attributes = entry[1].attributes
    keywords: list[tuple[str, Value]] = []
    specsys = _SPECSYS.get(str(attributes.get("frame", "")).upper())
    if specsys is not None:
        keywords.append(("SPECSYS", specsys))
    rest = _hertz(attributes.get("rest_frequency"))
    if rest is not None:
        keywords.append(("RESTFRQ", rest))
    factor = _HERTZ[units]
    return World({entry[0]: WorldAxis("FREQ", step[0] * factor, step[1] * factor, cunit="Hz")},
                 keywords=tuple(keywords))


def _time(entry: tuple[int, Coordinate] | None) -> World | None:
    step = evenly_spaced(entry[1]) if entry is not None else None
    if entry is None or step is None:
        return None
    attributes = entry[1].attributes
    if attributes.get("format") != "mjd" or attributes.get("units", "d") != "d":
        return None
    keywords: list[tuple[str, Value]] = [("MJDREF", 0.0), ("MJD-OBS", step[0])]
    scale = str(attributes.get("scale", "")).upper()
    if scale in _TIME_SCALES:
        keywords.append(("TIMESYS", scale))
    keywords.append(("DATE-OBS", str(_MJD_ZERO + np.timedelta64(round(step[0] * 86_400_000), "ms"))))
    return World({entry[0]: WorldAxis("TIME", step[0], step[1], cunit="d")}, keywords=tuple(keywords))


def _measure(value: object) -> tuple[Sequence[Any], Mapping[str, Any]] | None:
    """An XRADIO measure's values and attributes (`{"data": ..., "attrs": {...}}`)."""
    if not isinstance(value, Mapping) or not isinstance(value.get("attrs", {}), Mapping):
        return None
    data = value.get("data")
    return (data if isinstance(data, list) else [data]), value.get("attrs", {})


def _hertz(quantity: object) -> float | None:
    """A quantity (`{"data": 1.4e9, "attrs": {"units": "Hz"}}`) in Hz."""
    found = _measure(quantity)
    if found is None or len(found[0]) != 1:
        return None
    value, unit = _number(found[0][0]), found[1].get("units", "Hz")
    return None if value is None or unit not in _HERTZ else value * _HERTZ[unit]


def _degrees(measure: tuple[Sequence[Any], Mapping[str, Any]] | None,
             default: str = "") -> list[float] | None:
    if measure is None:
        return None
    units = measure[1].get("units", default)
    units = set(units) if isinstance(units, list) else {units}
    numbers = [_number(v) for v in measure[0]]
    if len(units) != 1 or (unit := units.pop()) not in _DEGREES or None in numbers:
        return None
    return [float(v or 0.0) * _DEGREES[unit] for v in numbers]


def _year(equinox: object) -> float | None:
    """An equinox as 'j2000.0', 'B1950' or 2000: its year."""
    try:
        return float(str(equinox).strip().lower().lstrip("jb")) if equinox is not None else None
    except ValueError:
        return None


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
