"""The WCS keywords of `data.fits`: where its axes' coordinates give them.

- Every axis with an evenly spaced numeric coordinate (CF, xarray: the 1-D array named as its
  dimension), or with OME-Zarr's scale and translation, is a linear axis: CTYPE its name where
  that is a plain keyword of up to 8 letters (else LINEAR, the name in CNAME), CUNIT its unit
  where FITS has it. A name that FITS WCS gives a meaning of its own (FREQ, TIME, STOKES, ...)
  is not used: the values' unit and frame may not be the ones it implies.
- CF latitude and longitude (evenly spaced, in degrees; or GeoZarr's transform in EPSG:4326)
  are a celestial pair of the kind FITS WCS leaves to users (`xLON`/`xLAT`, Paper II): TLON
  and TLAT, T for terrestrial, in the plate carrée projection (CAR) with the reference latitude
  0, which makes it linear: longitude = CRVAL + CDELT * (pixel - CRPIX), latitude likewise.
  Readers of sky coordinates alone show them as a sphere's unnamed coordinates.
- XRADIO's sky images: their celestial, Stokes, spectral and time axes (`sky`).
"""

from __future__ import annotations

import re

from ..placement import (
    WGS84,
    Axis,
    Coordinate,
    Placement,
    Surroundings,
    geographic_axis,
    in_metres,
    in_seconds,
    regular_step,
)
from .cards import keyword_card, one_card
from .sky import sky_world
from .world import World, WorldAxis, combined, evenly_spaced

__all__ = ["world_cards"]

_PLAIN_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,7}")
# CTYPEs whose meaning FITS WCS fixes: spectral (Paper III), Stokes, complex, times (Paper VII).
_MEANINGFUL = frozenset(("FREQ", "ENER", "WAVN", "VRAD", "WAVE", "VOPT", "ZOPT", "AWAV", "VELO", "BETA",
                         "STOKES", "CPLX", "TIME", "UTC", "TAI", "TT", "TDT", "ET", "IAT", "UT1", "UT", "TDB",
                         "TCB", "TCG", "GPS", "LOCAL"))
_FITS_UNITS = {unit: unit for unit in ("m", "km", "cm", "mm", "um", "nm", "s", "ms", "us", "ns", "min", "h",
                                       "d", "Hz", "kHz", "MHz", "GHz", "deg", "rad", "K", "Pa", "hPa", "Jy")}
_FITS_UNITS.update({"degree": "deg", "degrees": "deg", "degrees_north": "deg", "degrees_east": "deg",
                    "radian": "rad", "radians": "rad", "second": "s", "seconds": "s", "day": "d",
                    "days": "d", "hour": "h", "hours": "h", "hertz": "Hz", "kelvin": "K"})


def world_cards(placement: Placement, shape: tuple[int, ...], fortran: bool) -> list[str]:
    """The WCS cards of an array of `shape` (FITS's first axis the file's fastest: the array's
    last, or its first in Fortran order)."""
    rank = len(shape)
    world = _world(placement, shape)

    def number(axis: int) -> int:
        return axis + 1 if fortran else rank - axis

    cards = []
    for axis in sorted(world.axes, key=number):
        found, i = world.axes[axis], number(axis)
        cards += [*keyword_card(f"CTYPE{i}", found.ctype), *keyword_card(f"CRPIX{i}", found.crpix),
                  *keyword_card(f"CRVAL{i}", found.crval), *keyword_card(f"CDELT{i}", found.cdelt)]
        cards += keyword_card(f"CUNIT{i}", found.cunit) if found.cunit else []
        cards += keyword_card(f"CNAME{i}", found.cname) if found.cname else []
    for (axis, other), value in world.matrix.items():
        cards += keyword_card(f"PC{number(axis)}_{number(other)}", value)
    for (axis, m), parameter in world.parameters.items():
        cards += keyword_card(f"PV{number(axis)}_{m}", parameter)
    for keyword, said in world.keywords:
        cards += keyword_card(keyword, said)
    return cards


def _world(placement: Placement, shape: tuple[int, ...]) -> World:
    around, rank = placement.surroundings, len(shape)
    linear = {axis: found for axis in range(rank) if (found := _linear(placement, axis)) is not None}
    layers = [World(linear), _geographic(placement, shape)]
    if around is not None and len(around.coordinates) == rank:
        layers.append(sky_world(around))
    world = combined(layers)
    if not world.axes:
        return world
    # (every axis or none: readers warn of an image whose axes are partly described; those
    # without coordinates count elements from 0)
    unknown = {axis: _named(_name(placement, axis), 0.0, 1.0, None)
               for axis in range(rank) if axis not in world.axes}
    return combined([world, World(unknown)])


def _name(placement: Placement, axis: int) -> str | None:
    """The axis's dimension name, else its coordinate's, else OME-Zarr's name of it."""
    around = placement.surroundings
    names = around.dimension_names if around is not None and around.dimension_names else ()
    coordinate, named = _coordinate(placement, axis), _ome_axis(placement, axis)
    return ((names[axis] if axis < len(names) else None) or (coordinate.name if coordinate else None)
            or (named.name if named else None))


def _coordinate(placement: Placement, axis: int) -> Coordinate | None:
    around = placement.surroundings
    return around.coordinates[axis] if around is not None and axis < len(around.coordinates) else None


def _ome_axis(placement: Placement, axis: int) -> Axis | None:
    axes = placement.axes
    return axes[axis] if axes is not None and axis < len(axes) else None


def _linear(placement: Placement, axis: int) -> WorldAxis | None:
    coordinate, named = _coordinate(placement, axis), _ome_axis(placement, axis)
    if coordinate is not None:
        return _from_coordinate(coordinate)
    if named is None or placement.spacing is None:  # (OME-Zarr's, not the pixel counts of others)
        return None
    unit, factor = _unit(named.unit)
    step = placement.spacing[axis] * (-1.0 if placement.flipped and placement.flipped[axis] else 1.0)
    origin = placement.origin[axis] if placement.origin is not None else 0.0
    return _named(named.name, origin * factor, step * factor, unit)


def _from_coordinate(coordinate: Coordinate) -> WorldAxis | None:
    first_step = evenly_spaced(coordinate)
    if first_step is None:
        return None
    units = coordinate.attributes.get("units")
    unit, factor = _unit(units if isinstance(units, str) else None)
    return _named(coordinate.name, first_step[0] * factor, first_step[1] * factor, unit)


def _named(name: str | None, first: float, step: float, unit: str | None) -> WorldAxis:
    ctype = (name or "").upper()
    if _PLAIN_NAME.fullmatch(ctype) and ctype not in _MEANINGFUL:
        return WorldAxis(ctype, first, step, cunit=unit)
    return WorldAxis("LINEAR", first, step, cunit=unit, cname=name if name and one_card(name) else None)


def _unit(unit: str | None) -> tuple[str | None, float]:
    """The FITS unit of values in `unit` (CF's or OME-Zarr's names), and what to multiply them
    by (OME-Zarr's lengths and times in metres and seconds)."""
    if unit in _FITS_UNITS:
        return _FITS_UNITS[unit], 1.0
    for fits_unit, factor in (("m", in_metres(unit)), ("s", in_seconds(unit))):
        if factor is not None:
            return fits_unit, factor
    return None, 1.0


def _geographic(placement: Placement, shape: tuple[int, ...]) -> World | None:
    """Longitude and latitude, from CF coordinates or a GeoZarr transform in EPSG:4326."""
    around = placement.surroundings
    pair = _geographic_coordinates(around) if around is not None else None
    rank = len(shape)
    if pair is None and placement.crs == WGS84 and placement.geotransform is not None and rank >= 2:
        x0, dx, rx, y0, ry, dy = placement.geotransform
        if rx == 0 and ry == 0:  # (cells' edges: the first centre is half a step in)
            pair = (rank - 1, x0 + dx / 2, dx), (rank - 2, y0 + dy / 2, dy)
    if pair is None:
        return None
    (lon_axis, lon, lon_step), (lat_axis, lat, lat_step) = pair
    middle = round((shape[lon_axis] - 1) / 2)  # (CAR's native longitudes are within 180 of it)
    return World({lon_axis: WorldAxis("TLON-CAR", lon + middle * lon_step, lon_step, 1.0 + middle, "deg",
                                      "longitude"),
                  lat_axis: WorldAxis("TLAT-CAR", 0.0, lat_step, 1.0 - lat / lat_step, "deg", "latitude")})


def _geographic_coordinates(around: Surroundings) -> tuple[tuple[int, float, float], ...] | None:
    found: dict[str, tuple[int, float, float]] = {}
    for axis, coordinate in enumerate(around.coordinates):
        which = geographic_axis(coordinate) if coordinate is not None else None
        step = regular_step(coordinate.values) if coordinate is not None and which else None
        if which is not None and step is not None:
            found[which] = (axis, *step)
    if "longitude" not in found or "latitude" not in found:
        return None
    return found["longitude"], found["latitude"]
