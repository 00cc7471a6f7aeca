"""Where an array's elements are and what they mean, for the views that say so (voxel spacing
and origin for NRRD and MetaImage, geotransform and CRS for VRT and GeoTIFF, band names): from
CF coordinates (`core`, with CF times in `cf_time`), GeoZarr (`geozarr`) and OME-Zarr
multiscales (`ome`). Part of the view contract: every family may use it."""

from .core import NOWHERE, WGS84, Coordinate, Placement, cf_placement, fill_number
from .geozarr import geozarr_georeference
from .ome import ome_placement

__all__ = ["NOWHERE", "WGS84", "Coordinate", "Placement", "cf_placement", "fill_number",
           "geozarr_georeference", "ome_placement"]
