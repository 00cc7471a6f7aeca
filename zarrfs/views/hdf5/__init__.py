"""`data.h5`: an array, an array of strings, or a group as a NetCDF-4/HDF5 file, read-only.

`array_file` (an array's dataset), `strings` and `chars` (arrays of strings and bytes),
`group_file` and `group_views` (a group's file), `described` (an array not opened yet);
the file's structures as bytes in `structures`, its chunk index and slots in
`dataset_chunks`, its filters in `filters`, attributes, dimensions, times and vlen heaps in
the modules so named."""

from ..plugins import PLUGIN_FILTERS
from .array_file import H5_NAME
from .group_views import H5_KIND, H5GroupViews
from .strings import StringSource, VariableStrings, array_h5_file, shows_h5, shows_strings_h5, strings_h5_file

OPTIONS = (PLUGIN_FILTERS,)  # (the mount's options data.h5 reads: `-o filters=`)

__all__ = ["H5_KIND", "H5_NAME", "OPTIONS", "H5GroupViews", "StringSource", "VariableStrings",
           "array_h5_file", "shows_h5", "shows_strings_h5", "strings_h5_file"]
