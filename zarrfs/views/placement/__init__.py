"""Where an array's elements are and what they mean, for the views that say so (voxel spacing
and origin, geotransform and CRS, band names), and the neighbourhood they were found from: from
CF coordinates (`core`, with CF times in `cf_time`), GeoZarr (`geozarr`) and OME-Zarr
multiscales (`ome`, the units of its axes in `units`). Part of the view contract: every family
may use it."""

from .core import (
    NOWHERE,
    WGS84,
    Axis,
    Coordinate,
    Placement,
    SiblingReader,
    Surroundings,
    cf_placement,
    fill_number,
    geographic_axis,
    regular_step,
)
from .geozarr import geozarr_georeference
from .ome import ome_axes, ome_finest_level, ome_placement
from .units import in_metres, in_seconds

__all__ = ["NOWHERE", "WGS84", "Axis", "Coordinate", "Placement", "SiblingReader", "Surroundings",
           "cf_placement", "fill_number", "geographic_axis", "geozarr_georeference", "in_metres",
           "in_seconds", "ome_axes", "ome_finest_level", "ome_placement", "regular_step"]
