"""Voxel sizes for the NRRD and MetaImage headers, from OME-Zarr multiscales metadata (0.4
keeps it in the group's attributes, 0.5 under their "ome" member): the "scale" transformation
of the dataset whose path is the array's name."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any


def ome_spacings(group_attributes: Mapping[str, Any], name: str, rank: int) -> list[float] | None:
    """One positive number per axis, or None when the group says nothing usable."""
    for dataset in _datasets(group_attributes):
        if dataset.get("path") != name:
            continue
        for step in dataset.get("coordinateTransformations") or []:
            if isinstance(step, Mapping) and step.get("type") == "scale":
                return _valid(step.get("scale"), rank)
    return None


def _datasets(attributes: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    ome = attributes.get("ome")
    multiscales = attributes.get("multiscales", ome.get("multiscales") if isinstance(ome, Mapping) else None)
    for scale in multiscales if isinstance(multiscales, list) else []:
        datasets = scale.get("datasets") if isinstance(scale, Mapping) else None
        yield from (d for d in (datasets if isinstance(datasets, list) else []) if isinstance(d, Mapping))


def _valid(values: object, rank: int) -> list[float] | None:
    if not isinstance(values, list) or len(values) != rank:
        return None
    numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numbers) != rank or not all(v > 0 and math.isfinite(v) for v in numbers):
        return None
    return numbers
