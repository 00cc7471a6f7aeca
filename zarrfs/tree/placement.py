"""Finding where an array's elements are (`views.placement.Placement`), once per array, when a
header first needs it: OME-Zarr transformations from the parent group, CF attributes of the
array, and the CF/xarray coordinate arrays beside it (1-D arrays named as the array's
dimensions, read whole, at most `MAX_COORDINATE_ELEMENTS` each) and its `grid_mapping`
variable; the axes of an OME-Zarr image. With it go the array's surroundings, format-free: its
attributes, coordinates, group's attributes, and a reader of the small arrays beside it, which
the view families read as their formats say (a header an image keeps beside its levels). A
failure here costs the array its placement (logged), never the array."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import numpy as np

from ..formats import NodeMetadata
from ..formats.description import ArrayDescription
from ..formats.nodes import join_path
from ..formats.registry import xarray_fill_value
from ..grid import Box
from ..views.array_dir import ArrayDirectory
from ..views.placement import (
    NOWHERE,
    Coordinate,
    Placement,
    SiblingReader,
    Surroundings,
    cf_placement,
    geozarr_georeference,
    ome_axes,
    ome_placement,
)

log = logging.getLogger(__name__)

MAX_COORDINATE_ELEMENTS = 1_000_000


@dataclass(frozen=True)
class Siblings:
    """The nodes of the array's group, by name (None: no such child), and opening one."""

    node: Callable[[str], NodeMetadata | None]
    open: Callable[[str], ArrayDirectory | None]


NodeAt = Callable[[str], "NodeMetadata | None"]  # the tree's node at a path


def placement_finder(node: NodeMetadata, description: ArrayDescription, nodes: NodeAt,
                     child: Callable[[str, str], NodeMetadata | None],
                     open_array: Callable[[str], ArrayDirectory | None]) -> Callable[[], Placement]:
    """Where the array's elements are, found when a header first needs it (OME-Zarr metadata of
    the parent group, CF attributes, coordinate arrays beside it). `nodes`: the tree's node at a
    path; `child`: a group's child by name; `open_array`: an array's directory by path."""
    parent, _, name = node.path.rpartition("/")
    siblings = Siblings(lambda sibling: child(parent, sibling),
                        lambda sibling: open_array(join_path(parent, sibling)))

    def find() -> Placement:
        group = nodes(parent) if name else None
        return find_placement(node, description, group, siblings if name else None)

    return find


def find_placement(node: NodeMetadata, description: ArrayDescription,
                   group: NodeMetadata | None, siblings: Siblings | None) -> Placement:
    try:
        return _placement(node, description, group, siblings)
    except Exception as e:  # a coordinate array that cannot be read, odd metadata: no placement
        log.warning("array %s: its coordinates and placement cannot be read (%s: %s); headers without",
                    node.path or "/", type(e).__name__, e)
        return NOWHERE


def _placement(node: NodeMetadata, description: ArrayDescription,
               group: NodeMetadata | None, siblings: Siblings | None) -> Placement:
    attributes = description.attributes
    coordinates = [_coordinate(siblings, name, length, node.name)
                   for name, length in zip(description.dimension_names or [None] * description.rank,
                                           description.shape, strict=True)]
    grid_mapping = _grid_mapping(siblings, attributes.get("grid_mapping"))
    found = cf_placement(attributes, description.data_type.storage, coordinates,
                         grid_mapping=grid_mapping, stored_fill=_stored_fill(node, description))
    geo = geozarr_georeference(attributes, group.attributes if group is not None else {},
                               description.dimension_names)
    if geo is not None and description.rank in (2, 3):  # (stated: it wins over what is derived)
        found = replace(found, geotransform=geo.geotransform or found.geotransform,
                        crs=geo.crs or found.crs)
    ome = ome_placement(group.attributes, node.name, description.rank) if group is not None else None
    if ome is not None:
        found = replace(found, spacing=ome.spacing, origin=ome.origin, flipped=None)
    if group is not None and siblings is not None:
        found = replace(found, axes=ome_axes(group.attributes, node.name, description.rank))
    names = tuple(description.dimension_names) if description.dimension_names else None
    around = Surroundings(attributes, tuple(coordinates), group.attributes if group is not None else {},
                          names, node.name if group is not None else "", _sibling_reader(siblings, node.path))
    return replace(found, surroundings=around)


def _sibling_reader(siblings: Siblings | None, path: str) -> SiblingReader:
    """Reads an array beside this one whole, once (the surroundings live as long as the
    placement, which is found once per opened array); None where there is none, or it is
    larger than asked. A failure to read is logged and costs only that sibling."""

    @cache
    def read(name: str, max_bytes: int) -> np.ndarray[Any, Any] | None:
        if siblings is None or not name or "/" in name or siblings.node(name) is None:
            return None
        try:
            opened = siblings.open(name)
            if opened is None:
                return None
            meta = opened.array.metadata
            if math.prod(meta.shape) * meta.data_type.storage.itemsize > max_bytes:
                return None
            return np.asarray(opened.array.read(Box((0,) * len(meta.shape), meta.shape)))
        except Exception as e:  # (as a placement's: a sibling that cannot be read is none)
            log.warning("array %s: the array %s beside it cannot be read (%s: %s)",
                        path or "/", name, type(e).__name__, e)
            return None

    return read


def _coordinate(siblings: Siblings | None, name: str | None, length: int, own_name: str) -> Coordinate | None:
    """The dimension's coordinate array: 1-D, named and dimensioned as the dimension, as long
    as the array's axis (a coordinate array is not its own coordinate)."""
    if siblings is None or not name or name == own_name or "/" in name or siblings.node(name) is None:
        return None
    opened = siblings.open(name)
    if opened is None:
        return None
    meta = opened.array.metadata
    if meta.shape != (length,) or meta.dimension_names != (name,) or length > MAX_COORDINATE_ELEMENTS:
        return None
    values = np.array(opened.array.read(Box((0,), (length,))))
    return Coordinate(name, values, meta.attributes)


def _grid_mapping(siblings: Siblings | None, reference: object) -> Mapping[str, Any] | None:
    """The attributes of the CF grid-mapping variable (`grid_mapping: "crs"`, or the extended
    form `"crs: x y"`, whose first name is taken)."""
    if siblings is None or not isinstance(reference, str) or not reference.split():
        return None
    name = reference.split()[0].rstrip(":")
    found = siblings.node(name) if name and "/" not in name else None
    return None if found is None else found.attributes


def _stored_fill(node: NodeMetadata, description: ArrayDescription) -> object:
    """The format's fill value when it means "no data": xarray keeps a v2 variable's
    `_FillValue` as the array's `fill_value` (null when there is none); a NaN fill value
    means missing anywhere."""
    stated = xarray_fill_value(node, description.attributes)
    if stated is not None:
        return stated
    storage = description.data_type.storage
    fill = description.fill_value
    if storage.kind == "f" and len(fill) == storage.itemsize and math.isnan(np.frombuffer(fill, storage)[0]):
        return "NaN"
    return None
