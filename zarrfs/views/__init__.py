"""The virtual files of an array and of a group directory (pure: byte ranges <-> regions,
names, attributes). The modules at the top (and `placement/`) are the view contract every
format's files meet; each format family is a subpackage entered through its `__init__`:
`headers/`, `nifti/`, `mrc/`, `tiff/`, `hdf5/`, `netcdf/`, `text/`. This face exports the
contract's files, chunk names and extended attributes, and how an open file is read (its
`Reading`, from the array layer's reads room), for the layers above that serve it."""

from ..array import Ahead, Reading, Streaming
from .chunks import ChunkNames
from .files import BytesFile, FileTooLargeError, FileView, MadeView, RegionArray
from .region_file import RegionFile
from .xattrs import array_attributes, group_attributes, views_attribute

__all__ = ["Ahead", "BytesFile", "ChunkNames", "FileTooLargeError", "FileView", "MadeView", "Reading",
           "RegionArray", "RegionFile", "Streaming", "array_attributes", "group_attributes",
           "views_attribute"]
