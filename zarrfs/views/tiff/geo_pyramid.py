"""A multiscale group as cloud-optimized GeoTIFFs with overviews, as QGIS, GDAL and OpenSlide
read them: a GeoZarr group, or an OME-Zarr image's levels (`pyramid_levels`).

The group follows the zarr-conventions `multiscales` convention, version 1 (schema
https://raw.githubusercontent.com/zarr-conventions/multiscales/refs/tags/v1/schema.json; its
0.1 drafts have the same `layout`): `multiscales.layout` lists the levels, each an `asset`
path below the group, an array or a group of arrays. The full resolution (the largest level)
is the file's first image, georeferenced; every coarser level follows it in the same IFD chain
as a reduced-resolution image (NewSubfileType 1), which is where a COG keeps its overviews and
GDAL and OpenSlide look for them; the overviews' tiles come first in the file, the smallest's
first, as the COG layout asks. Tiles are chunks as in `data.tif` (`array_file`).

Levels that are arrays make one `data.tif`; levels that are groups make a `<name>.tif` for
each array name they hold. Pure: the tree finds and opens the levels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..files import FileForm, StoredArray
from ..placement import Placement, geozarr_georeference
from .array_file import TiffFile, shows_tiff
from .directories import TiffImage
from .geotiff import geotiff_tags
from .layout import ImageShape
from .ome_tiff import multiscale_of
from .parts import array_part

ARRAY_LEVELS_NAME = "data.tif"
_PROJ_PREFIX, _PROJ_CODE = "proj:", "proj:code"


@dataclass(frozen=True)
class Level:
    """One entry of the layout: its asset's path below the group, and the entry as written."""

    asset: str
    entry: Mapping[str, Any]


def geo_multiscale_of(attributes: Mapping[str, Any]) -> tuple[Level, ...] | None:
    """The levels of a group's `multiscales` layout (None: it has none, or one that names an
    asset twice or outside the group). Also the `multiscales` list that xarray pyramids
    (ndpyramid) write: `datasets` of level paths, each with its `crs`; but not OME-Zarr's, a list
    with `axes`, which is an image's (`ome_tiff`)."""
    found = attributes.get("multiscales")
    layout = found.get("layout") if isinstance(found, Mapping) else _datasets(found)
    if not isinstance(layout, list) or not layout:
        return None
    levels = [Level(entry["asset"], entry) for entry in layout
              if isinstance(entry, Mapping) and _inside(entry.get("asset"))]
    if len(levels) != len(layout) or len({level.asset for level in levels}) != len(levels):
        return None
    return tuple(levels)


def pyramid_levels(attributes: Mapping[str, Any]) -> tuple[Level, ...] | None:
    """The levels of a multiscale group, as `geo_multiscale_of` finds them or, for an OME-Zarr
    image, its datasets (arrays of the group: OpenSlide and GDAL read the levels of `data.tif`,
    not the SubIFDs of `data.ome.tif`)."""
    found = geo_multiscale_of(attributes)
    image = multiscale_of(attributes) if found is None else None
    if image is not None:
        return tuple(Level(path, {"asset": path}) for path in image.paths)
    return found


def _datasets(found: object) -> list[Any] | None:
    """ndpyramid's `datasets` as layout entries (`path` the asset, `crs` a `proj:code`)."""
    first = found[0] if isinstance(found, list) and found else None
    if not isinstance(first, Mapping) or "axes" in first or not isinstance(first.get("datasets"), list):
        return None
    return [{"asset": d.get("path"), **({_PROJ_CODE: d["crs"]} if isinstance(d.get("crs"), str) else {})}
            if isinstance(d, Mapping) else d for d in first["datasets"]]


def _inside(asset: object) -> bool:
    """A relative path below the group (the convention allows no `/` first and no `..`)."""
    return isinstance(asset, str) and all(part not in ("", ".", "..") for part in asset.split("/"))


def level_placement(placement: Placement, level: Level, first: bool, group_attributes: Mapping[str, Any],
                    dimension_names: Sequence[str | None] | None) -> Placement:
    """The full resolution's placement, completed from the layout where its array says less:
    the level's own `spatial:transform`, or the group's when the level is the layout's first
    (the group's describes that one), and the level's CRS or else the group's."""
    if placement.geotransform is not None and placement.crs is not None:
        return placement
    own: dict[str, Any] = {}
    if "spatial:transform" in level.entry:
        own = {key: value for key, value in group_attributes.items() if key == "spatial:dimensions"}
        own.update(level.entry)
    fallback = dict(group_attributes) if first and not own else {}
    fallback.update((key, value) for key, value in (*group_attributes.items(), *level.entry.items())
                    if key.startswith(_PROJ_PREFIX))
    found = geozarr_georeference(own, fallback, dimension_names)
    if found is None:
        return placement
    return replace(placement, geotransform=placement.geotransform or found.geotransform,
                   crs=placement.crs or found.crs)


def pyramid_file(levels: Sequence[StoredArray], placement: Placement, form: FileForm) -> TiffFile | None:
    """The largest of `levels` (arrays of one variable) as the image, placed as `placement`
    says, with the others that are smaller in both image dimensions (and alike in the others
    and in type) as its overviews, largest first, their tiles as `form` says. None: the
    largest is no TIFF image."""
    full = max(levels, key=lambda level: level.shape[-2] * level.shape[-1])
    image = ImageShape.of(full.shape) if shows_tiff(full) else None
    if image is None:
        return None
    overviews: dict[tuple[int, ...], StoredArray] = {}
    for level in levels:
        if (level.shape[:-2] == full.shape[:-2] and level.data_type == full.data_type
                and all(n < f for n, f in zip(level.shape[-2:], full.shape[-2:], strict=True))):
            overviews.setdefault(tuple(level.shape), level)
    smaller = sorted(overviews.values(), key=lambda level: -level.shape[-1])
    groups = image.groups()
    tags = tuple(geotiff_tags(placement, image.samples))
    parts = [array_part(full, form, groups, [tags] * len(groups)),
             *(array_part(level, form, groups, [()] * len(groups), reduced=True) for level in smaller)]

    def chained(images: list[list[TiffImage]]) -> list[TiffImage]:
        """One page: it, then its overviews, as a COG (GDAL takes the reduced images of the
        chain as the first page's). More pages: each with its overviews as its SubIFDs."""
        if len(groups) == 1:
            return [level[0] for level in images]
        return [TiffImage(page.tags, page.offsets, page.byte_counts, page.tiled,
                          tuple(level[number] for level in images[1:]))
                for number, page in enumerate(images[0])]

    return TiffFile(parts, chained, form.byteorder, smallest_first=True)
