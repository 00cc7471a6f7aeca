"""`data.tif` (an array as a tiled TIFF, GeoTIFF where placed), `data.ome.tif` of OME-Zarr
images and the GeoTIFFs with overviews of multiscale groups.

`array_file` (an array's file), `parts` (an array's images in it: tiles as stored, decoded
tiles or strips, as `-o filters=` allows), `directories` (IFDs as bytes), `layout` (where everything
lies), `tables` and `tile_sizes` (offset and byte-count tables made as read), `stored_tiles`
(tiles that are chunks as stored), `geotiff`, `ome_tiff`, `geo_pyramid`, and the group
files made of several arrays (`geo_views`, `ome_views`)."""

from ..plugins import PLUGIN_FILTERS
from .array_file import shows_array_tiff, tiff_file
from .geo_views import GeoTiffViews
from .ome_tiff import OME_TIFF_NAME
from .ome_views import OmeTiffViews
from .parts import STRIPS

OPTIONS = (PLUGIN_FILTERS, STRIPS)  # (the mount's options the TIFF views read: `-o filters=`, `-o tiff=`)

__all__ = ["OME_TIFF_NAME", "OPTIONS", "STRIPS", "GeoTiffViews", "OmeTiffViews", "shows_array_tiff",
           "tiff_file"]
