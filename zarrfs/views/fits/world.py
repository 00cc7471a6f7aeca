"""World coordinates as FITS WCS says them (Greisen and Calabretta 2002, Paper I): per axis a
type, a reference pixel, the value there and the step, and what no one axis holds (the
rotation of a celestial pair, its projection's parameters, the frames). Axes are counted here as
the array counts them (C order): which FITS axis each is follows the file's order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..placement import Coordinate, regular_step
from .cards import Value

__all__ = ["World", "WorldAxis", "combined", "evenly_spaced"]


@dataclass(frozen=True)
class WorldAxis:
    """value = crval + cdelt * (pixel - crpix), pixels counted from 1 (of a celestial pair:
    the coordinates in its projection's plane, in degrees)."""

    ctype: str
    crval: float
    cdelt: float
    crpix: float = 1.0
    cunit: str | None = None
    cname: str | None = None  # (CNAMEi: the axis's name, where CTYPEi is not)


@dataclass(frozen=True)
class World:
    axes: Mapping[int, WorldAxis]  # by the array's axis
    matrix: Mapping[tuple[int, int], float] = field(default_factory=dict)  # PCi_j, by the array's axes
    parameters: Mapping[tuple[int, int], float] = field(default_factory=dict)  # PVi_m: (axis, m)
    keywords: tuple[tuple[str, Value], ...] = ()  # of the image (RADESYS, SPECSYS, ...)


def evenly_spaced(coordinate: Coordinate) -> tuple[float, float] | None:
    """(first value, step) of an evenly spaced numeric coordinate; of one value, a step of 1
    (any would do: the one element's value is exact)."""
    values = coordinate.values
    if values.ndim != 1 or values.dtype.kind not in "iuf" or not len(values):
        return None
    return regular_step(values) if len(values) > 1 else (float(values[0]), 1.0)


def combined(worlds: Iterable[World | None]) -> World:
    """One world of several: what a later one says of an axis replaces what the earlier said."""
    axes: dict[int, WorldAxis] = {}
    matrix: dict[tuple[int, int], float] = {}
    parameters: dict[tuple[int, int], float] = {}
    keywords: dict[str, Value] = {}
    for world in worlds:
        if world is None:
            continue
        axes.update(world.axes)
        matrix.update(world.matrix)
        parameters.update(world.parameters)
        keywords.update(world.keywords)
    return World(axes, matrix, parameters, tuple(keywords.items()))
