"""GeoZarr's conventions for where a raster lies: `spatial:` (an affine transform from array
indices to coordinates, over the dimensions `spatial:dimensions` names) and `proj:` (the CRS
as `proj:code`, `proj:wkt2` or `proj:projjson`). Pure: attributes in, GDAL's numbers out.

An array's own attributes come first, then its group's (a multiscale pyramid may state the
CRS once for all its levels). Anything malformed gives nothing, never a guess."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Georeference", "geozarr_georeference"]


@dataclass(frozen=True)
class Georeference:
    geotransform: tuple[float, ...] | None  # GDAL's six numbers
    crs: str | None  # what GDAL's <SRS> takes: "EPSG:32633", WKT2 or PROJJSON


def geozarr_georeference(attributes: Mapping[str, Any], group_attributes: Mapping[str, Any],
                         dimension_names: Sequence[str | None] | None) -> Georeference | None:
    """What the conventions say of a raster whose last two dimensions are y and x; None when
    they say nothing usable."""
    transform = _transform(attributes, dimension_names)
    if transform is None and not _names_spatial(attributes):
        transform = _transform(group_attributes, dimension_names)
    crs = _crs(attributes) or _crs(group_attributes)
    if transform is None and crs is None:
        return None
    return Georeference(transform, crs)


def _names_spatial(attributes: Mapping[str, Any]) -> bool:
    return any(key.startswith("spatial:") for key in attributes)


def _transform(attributes: Mapping[str, Any],
               dimension_names: Sequence[str | None] | None) -> tuple[float, ...] | None:
    """GDAL's geotransform from `spatial:transform` ([a, b, c, d, e, f]: x = a*col + b*row + c,
    y = d*col + e*row + f, of the cells' corners; of their centres with `spatial:registration`
    "node")."""
    values = attributes.get("spatial:transform")
    if attributes.get("spatial:transform_type", "affine") != "affine" or not _numbers(values, 6):
        return None
    assert isinstance(values, list)
    dimensions = attributes.get("spatial:dimensions")
    if dimensions is not None:
        if not isinstance(dimensions, list) or len(dimensions) != 2:
            return None
        if dimension_names is None or list(dimension_names[-2:]) != dimensions:
            return None  # (not the last two axes as y, x: GDAL could not use it)
    a, b, c, d, e, f = (float(v) for v in values)
    if attributes.get("spatial:registration", "pixel") == "node":
        c, f = c - (a + b) / 2, f - (d + e) / 2
    return (c, a, b, f, d, e)


def _crs(attributes: Mapping[str, Any]) -> str | None:
    for key in ("proj:code", "proj:wkt2"):
        value = attributes.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    projjson = attributes.get("proj:projjson")
    if isinstance(projjson, Mapping):
        return json.dumps(projjson)
    if isinstance(projjson, str) and projjson.strip():
        return projjson.strip()
    return None


def _numbers(values: object, count: int) -> bool:
    return (isinstance(values, list) and len(values) == count
            and all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                    for v in values))
