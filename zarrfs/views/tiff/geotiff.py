"""What a `Placement` says of an array, as the tags GeoTIFF readers and GDAL read: the
georeferencing (tie point and pixel scale, or a transformation matrix when the grid is not
north-up), the CRS (an EPSG code where the WKT names one, else GDAL's citation of the whole
WKT), NoData (GDAL_NODATA) and band names, units, scale and offset (GDAL_METADATA).

The same `Placement` makes `data.vrt`, so both views put the array at the same place."""

from __future__ import annotations

import logging
import math
import re
from xml.sax.saxutils import escape

from ..placement import WGS84, Placement
from .directories import ASCII, Tag

log = logging.getLogger(__name__)
MODEL_PIXEL_SCALE, MODEL_TIEPOINT, MODEL_TRANSFORMATION = 33550, 33922, 34264
GEO_KEY_DIRECTORY, GEO_DOUBLE_PARAMS, GEO_ASCII_PARAMS = 34735, 34736, 34737
GDAL_METADATA, GDAL_NODATA = 42112, 42113

# GeoKeys (GeoTIFF 1.1, section 7)
_MODEL_TYPE, _RASTER_TYPE, _CITATION = 1024, 1025, 1026
_GEOGRAPHIC_TYPE, _GEOGRAPHIC_CITATION, _PROJECTED_TYPE, _PROJECTED_CITATION = 2048, 2049, 3072, 3073
_PROJECTED, _GEOGRAPHIC, _PIXEL_IS_AREA, _USER_DEFINED = 1, 2, 1, 32767
# The authority of the CRS as a whole: WKT names it last (its parts' come before).
_EPSG_CODE = re.compile(r'(?:AUTHORITY|ID)\[\s*"EPSG"\s*,\s*"?(\d+)"?\s*\]\s*\]\s*$', re.IGNORECASE)
_GEOGRAPHIC_WKT = ("GEOGCS", "GEOGCRS", "GEOGRAPHICCRS", "GEODCRS")
_WKT_START = re.compile(r"\s*[A-Z_]+\s*\[", re.IGNORECASE)


def geotiff_tags(placement: Placement, samples: int) -> list[Tag]:
    """The tags for an image of `samples` bands placed as `placement` says (none: no tags)."""
    tags = _georeferencing(placement)
    if placement.nodata is not None:
        tags.append(Tag.ascii(GDAL_NODATA, _number(placement.nodata)))
    metadata = _gdal_metadata(placement, samples)
    if metadata is not None:
        tags.append(Tag.ascii(GDAL_METADATA, metadata))
    return tags


def _georeferencing(placement: Placement) -> list[Tag]:
    transform = placement.geotransform
    if transform is None:
        return []
    x0, dx, rx, y0, ry, dy = transform
    if rx == 0 and ry == 0 and dy < 0:
        tags = [Tag.doubles(MODEL_PIXEL_SCALE, (dx, -dy, 0.0)),
                Tag.doubles(MODEL_TIEPOINT, (0.0, 0.0, 0.0, x0, y0, 0.0))]
    else:
        tags = [Tag.doubles(MODEL_TRANSFORMATION, (dx, rx, 0, x0, ry, dy, 0, y0, 0, 0, 0, 0, 0, 0, 0, 1))]
    return tags + _geo_keys(placement.crs)


def _geo_keys(crs: str | None) -> list[Tag]:
    keys: list[tuple[int, int]] = [(_RASTER_TYPE, _PIXEL_IS_AREA)]
    citations: list[tuple[int, str]] = []
    known = None if crs is None else _crs_keys(crs)
    if known is not None:
        geographic, code, crs = known
        keys.append((_MODEL_TYPE, _GEOGRAPHIC if geographic else _PROJECTED))
        keys.append((_GEOGRAPHIC_TYPE if geographic else _PROJECTED_TYPE, code or _USER_DEFINED))
        if code is None:  # GDAL reads a WKT it cannot find a code for from the citation
            citations.append((_GEOGRAPHIC_CITATION if geographic else _PROJECTED_CITATION,
                              f"ESRI PE String = {crs}"))
    ascii_params = ""
    entries = [(key, 0, 1, value) for key, value in keys]
    for key, text in citations:
        entries.append((key, GEO_ASCII_PARAMS, len(text) + 1, len(ascii_params)))
        ascii_params += text + "|"
    entries.sort()
    directory = [1, 1, 0, len(entries)] + [v for entry in entries for v in entry]
    tags = [Tag.shorts(GEO_KEY_DIRECTORY, *directory)]
    if ascii_params:
        tags.append(Tag(GEO_ASCII_PARAMS, ASCII, ascii_params.encode("utf-8")))
    return tags


def _crs_keys(crs: str) -> tuple[bool, int | None, str] | None:
    """Whether the CRS is geographic, its EPSG code (None: none), its WKT. A CRS given as a
    code ("EPSG:32632", GeoZarr's `proj:code`) or as PROJJSON is looked up in PROJ's database,
    which knows whether a code is geographic; None when it cannot be found there."""
    if crs == WGS84:
        return True, 4326, crs
    if _WKT_START.match(crs):
        return crs.lstrip().upper().startswith(_GEOGRAPHIC_WKT), _epsg_code(crs), crs
    import pyproj  # (only here: loading PROJ's database costs a mount nothing until needed)

    try:
        found = pyproj.CRS.from_user_input(crs)
    except pyproj.exceptions.CRSError as e:
        log.warning("a CRS PROJ does not know (%s): GeoTIFF views without one", e)
        return None
    return found.is_geographic, found.to_epsg(min_confidence=100), found.to_wkt()


def _epsg_code(wkt: str) -> int | None:
    found = _EPSG_CODE.search(wkt)
    return int(found.group(1)) if found and int(found.group(1)) < _USER_DEFINED else None


def _gdal_metadata(placement: Placement, samples: int) -> str | None:
    names = placement.band_names if placement.band_names and len(placement.band_names) == samples else None
    items = []
    for sample in range(samples):
        values = [("DESCRIPTION", "description", names[sample] if names else None),
                  ("SCALE", "scale", None if placement.scale is None else _number(placement.scale)),
                  ("OFFSET", "offset", None if placement.offset is None else _number(placement.offset)),
                  ("UNITTYPE", "unittype", placement.units)]
        items += [f'  <Item name="{name}" sample="{sample}" role="{role}">{escape(value)}</Item>'
                  for name, role, value in values if value is not None]
    if not items:
        return None
    return "<GDALMetadata>\n" + "\n".join(items) + "\n</GDALMetadata>\n"


def _number(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return str(int(value)) if float(value).is_integer() and abs(value) < 2**53 else repr(float(value))
