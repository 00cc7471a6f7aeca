"""Whether the mount's readers have the plugins that decode what not every reader decodes
(`-o filters=`): the one option the families that pass stored chunks through as they are
(`hdf5/`: HDF5 filters; `tiff/`: tiles) share, declared once, where both read it."""

from __future__ import annotations

from ..declared import choice

PLUGIN_FILTERS = choice(
    "filters", {"builtin": False, "plugins": True}, "builtin",
    "which stored chunks `data.h5` and the TIFF views (`data.tif`, `data.ome.tif`, the GeoTIFFs of "
    "multiscale groups) pass through as they are: `builtin` (default) those every reader decodes (HDF5: "
    "deflate, shuffle, fletcher32; TIFF: uncompressed and zlib chunks, as Deflate tiles), the others "
    "(zstd, blosc, bzip2, ...) decoded by the mount, so every reader opens the files without plugins "
    "(HDF5 1.8, pyfive, MATLAB, NCO, R; OpenCV, Pillow, tifffile without imagecodecs, desktop viewers); "
    "`plugins` also zstd, blosc and bzip2 as stored in `data.h5`, and zstd tiles as stored (TIFF "
    "Compression 50000) in the TIFF views, for readers with the plugins or codecs (h5py with "
    "`hdf5plugin`, `HDF5_PLUGIN_PATH`; GDAL, QGIS, napari, tifffile with imagecodecs, Bio-Formats): the "
    "mount decodes nothing — see [views.md](views.md#which-reader-needs-which-plugin) and "
    "[views.md](views.md#which-tiff-readers-open-it)")
