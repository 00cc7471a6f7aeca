"""Voxel sizes and origin for the NRRD and MetaImage headers, from OME-Zarr multiscales metadata
(0.4 keeps it in the group's attributes, 0.5 under their "ome" member): the "scale" and
"translation" transformations of the dataset whose path is the array's name, followed by the
multiscale's own `coordinateTransformations` (which apply after the dataset's)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from .core import Axis, Placement

__all__ = ["ome_axes", "ome_finest_level", "ome_placement"]


def ome_placement(group_attributes: Mapping[str, Any], name: str, rank: int) -> Placement | None:
    """Spacing and (when there is a translation) origin, or None when the group says nothing
    usable about the array: a scale or translation that does not fit voids both."""
    for multiscale, dataset in _datasets(group_attributes):
        if dataset.get("path") != name:
            continue
        steps = [*_steps(dataset), *_steps(multiscale)]
        scale, origin = [1.0] * rank, [0.0] * rank
        for kind, values in steps:
            numbers = _numbers(values, rank)
            if numbers is None or (kind == "scale" and not all(v > 0 for v in numbers)):
                return None
            if kind == "scale":
                scale = [a * b for a, b in zip(scale, numbers, strict=True)]
                origin = [a * b for a, b in zip(origin, numbers, strict=True)]
            else:
                origin = [a + b for a, b in zip(origin, numbers, strict=True)]
        if not any(kind == "scale" for kind, _ in steps):
            return None
        translated = any(kind == "translation" for kind, _ in steps)
        return Placement(spacing=tuple(scale), origin=tuple(origin) if translated else None)
    return None


def ome_axes(group_attributes: Mapping[str, Any], name: str, rank: int) -> tuple[Axis, ...] | None:
    """The name, type and unit of each axis of the level `name`, as its multiscale's `axes`
    say (None: it is no level, or they are not one per axis)."""
    for multiscale, dataset in _datasets(group_attributes):
        axes = multiscale.get("axes")
        if dataset.get("path") == name and isinstance(axes, list) and len(axes) == rank:
            return tuple(_axis(axis) for axis in axes)
    return None


def ome_finest_level(group_attributes: Mapping[str, Any], name: str) -> str | None:
    """The path of the first (finest) level of the multiscale `name` is a level of."""
    for multiscale, dataset in _datasets(group_attributes):
        if dataset.get("path") == name:
            levels = [level for owner, level in _datasets(group_attributes) if owner is multiscale]
            first = levels[0].get("path")
            return first if isinstance(first, str) else None
    return None


def _axis(axis: object) -> Axis:
    if isinstance(axis, str):  # (0.3: names alone)
        return Axis(name=axis)
    if not isinstance(axis, Mapping):
        return Axis()
    name, kind, unit = (axis.get(key) for key in ("name", "type", "unit"))
    return Axis(*(value if isinstance(value, str) else None for value in (name, kind, unit)))


def _datasets(attributes: Mapping[str, Any]) -> Iterator[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    ome = attributes.get("ome")
    multiscales = attributes.get("multiscales", ome.get("multiscales") if isinstance(ome, Mapping) else None)
    for scale in multiscales if isinstance(multiscales, list) else []:
        datasets = scale.get("datasets") if isinstance(scale, Mapping) else None
        for dataset in datasets if isinstance(datasets, list) else []:
            if isinstance(dataset, Mapping):
                yield scale, dataset


def _steps(owner: Mapping[str, Any]) -> Iterator[tuple[str, object]]:
    for step in owner.get("coordinateTransformations") or []:
        if isinstance(step, Mapping) and step.get("type") in ("scale", "translation"):
            yield str(step["type"]), step.get(str(step["type"]))


def _numbers(values: object, rank: int) -> list[float] | None:
    if not isinstance(values, list) or len(values) != rank:
        return None
    numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numbers) != rank or not all(math.isfinite(v) for v in numbers):
        return None
    return numbers
