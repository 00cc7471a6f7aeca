"""zarrfs: a Zarr v3 array as a directory of plain files, for ordinary Unix tools."""

__version__ = "0.1.0"
