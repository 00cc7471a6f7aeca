"""`data.ome.tif` of an OME-Zarr image group (0.4, and 0.5 under "ome"): its first multiscale
as an OME-TIFF pyramid. Every plane of the full resolution is an IFD, in the order OME-XML's
`DimensionOrder="XYZCT"` says (z fastest, then channel, then time); each has the same plane of
every lower resolution as its SubIFDs, so Bio-Formats, QuPath and tifffile open the pyramid.
The OME-XML in the first IFD gives the sizes and the physical sizes of the full resolution
(its scale, in the axes' units). Tiles are chunks as in `data.tif` (`array_file`)."""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from ..files import FileForm, StoredArray
from ..placement import ome_placement
from .array_file import TiffFile, shows_tiff
from .directories import ASCII, IMAGE_DESCRIPTION, Tag, TiffImage
from .layout import Group
from .parts import array_part

OME_TIFF_NAME = "data.ome.tif"
_OME_TYPES = {("int", 1): "int8", ("int", 2): "int16", ("int", 4): "int32", ("uint", 1): "uint8",
              ("uint", 2): "uint16", ("uint", 4): "uint32", ("float", 4): "float", ("float", 8): "double",
              ("complex", 8): "complex", ("complex", 16): "double-complex", ("bool", 1): "uint8"}
_UNITS = {"micrometer": "µm", "nanometer": "nm", "millimeter": "mm", "centimeter": "cm", "meter": "m",
          "angstrom": "Å", "picometer": "pm", "kilometer": "km", "inch": "in", "foot": "ft"}
_NAMESPACE = "http://www.openmicroscopy.org/Schemas/OME/2016-06"


@dataclass(frozen=True)
class Multiscale:
    """What the first multiscale of an image group says: its levels' paths, its axes."""

    name: str
    paths: tuple[str, ...]
    axes: tuple[str, ...]  # names, the last two y and x
    units: tuple[str | None, ...]
    attributes: Mapping[str, Any]  # the group's (for the scales of the levels)


def multiscale_of(attributes: Mapping[str, Any]) -> Multiscale | None:
    """The group's first multiscale, when it is an image whose last two axes are y and x and
    whose other axes are among t, c and z."""
    ome = attributes.get("ome")
    found = attributes.get("multiscales", ome.get("multiscales") if isinstance(ome, Mapping) else None)
    scale = found[0] if isinstance(found, list) and found and isinstance(found[0], Mapping) else None
    if scale is None:
        return None
    axes = [str(a.get("name") if isinstance(a, Mapping) else a) for a in scale.get("axes") or []]
    units = [a.get("unit") if isinstance(a, Mapping) else None for a in scale.get("axes") or []]
    paths = [d.get("path") for d in scale.get("datasets") or [] if isinstance(d, Mapping)]
    if (not paths or not all(isinstance(p, str) and p for p in paths) or axes[-2:] != ["y", "x"]
            or not set(axes[:-2]) <= {"t", "c", "z"} or len(set(axes)) != len(axes)):
        return None
    return Multiscale(str(scale.get("name") or "image"), tuple(str(p) for p in paths), tuple(axes),
                      tuple(u if isinstance(u, str) else None for u in units), attributes)


def ome_tiff_file(multiscale: Multiscale, levels: Sequence[StoredArray], form: FileForm) -> TiffFile | None:
    """The pyramid of the opened `levels` (the multiscale's arrays, full resolution first), their
    tiles as `form` says: those after the first whose planes differ from its planes are left out."""
    full = levels[0]
    if not shows_tiff(full) or len(full.shape) != len(multiscale.axes):
        return None
    kept = [level for level in levels
            if level.shape[:-2] == full.shape[:-2] and level.data_type == full.data_type]
    groups = _planes(multiscale.axes, full.shape)
    described = (Tag(IMAGE_DESCRIPTION, ASCII, _ome_xml(multiscale, full).encode("utf-8")),)
    first = [described, *[()] * (len(groups) - 1)]  # (the OME-XML, in the first IFD only)
    parts = [array_part(level, form, groups, first if n == 0 else [()] * len(groups), reduced=n > 0)
             for n, level in enumerate(kept)]

    def pyramid(images: list[list[TiffImage]]) -> list[TiffImage]:
        return [TiffImage(plane.tags, plane.offsets, plane.byte_counts, plane.tiled,
                          tuple(level[i] for level in images[1:]))
                for i, plane in enumerate(images[0])]

    return TiffFile(parts, pyramid, form.byteorder)


def _sizes(axes: Sequence[str], shape: Sequence[int]) -> dict[str, int]:
    return {name: shape[axes.index(name)] if name in axes else 1 for name in "tcz"}


def _planes(axes: Sequence[str], shape: Sequence[int]) -> list[Group]:
    """Each plane as an image of its own, in XYZCT order (z fastest)."""
    sizes = _sizes(axes, shape)
    leading = axes[:-2]
    return [((tuple({"t": t, "c": c, "z": z}[name] for name in leading)),)
            for t, c, z in product(range(sizes["t"]), range(sizes["c"]), range(sizes["z"]))]


def _ome_xml(multiscale: Multiscale, full: StoredArray) -> str:
    data_type = full.data_type
    kind = "uint" if data_type.kind == "int" and data_type.storage.kind == "u" else data_type.kind
    pixel_type = _OME_TYPES.get((kind, data_type.itemsize), "uint8")
    axes, shape = multiscale.axes, full.shape
    sizes = _sizes(axes, shape)
    attributes = {"ID": "Pixels:0", "DimensionOrder": "XYZCT", "Type": pixel_type,
                  "SizeX": shape[-1], "SizeY": shape[-2], "SizeZ": sizes["z"], "SizeC": sizes["c"],
                  "SizeT": sizes["t"], "BigEndian": "false", "Interleaved": "false",
                  **_physical(multiscale, len(shape))}
    pixels = " ".join(f"{key}={quoteattr(str(value))}" for key, value in attributes.items())
    channels = "".join(f'<Channel ID="Channel:0:{c}" SamplesPerPixel="1"/>' for c in range(sizes["c"]))
    planes = sizes["t"] * sizes["c"] * sizes["z"]
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<OME xmlns="{_NAMESPACE}" UUID="urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, multiscale.name)}" '
            'Creator="zarrfs">'
            f'<Image ID="Image:0" Name={quoteattr(escape(multiscale.name))}><Pixels {pixels}>{channels}'
            f'<TiffData IFD="0" PlaneCount="{planes}"/></Pixels></Image></OME>')


def _physical(multiscale: Multiscale, rank: int) -> dict[str, object]:
    placement = ome_placement(multiscale.attributes, multiscale.paths[0], rank)
    if placement is None or placement.spacing is None:
        return {}
    found: dict[str, object] = {}
    for name, size_key in (("x", "PhysicalSizeX"), ("y", "PhysicalSizeY"), ("z", "PhysicalSizeZ")):
        if name in multiscale.axes:
            position = multiscale.axes.index(name)
            value = placement.spacing[position]
            if math.isfinite(value) and value > 0:
                found[size_key] = repr(float(value))
                unit = _UNITS.get(multiscale.units[position] or "")
                if unit:
                    found[f"{size_key}Unit"] = unit
    return found
