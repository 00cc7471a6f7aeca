"""The virtual files of an array (pure: byte ranges <-> regions, names, attributes)."""

from .chunks import ChunkNames
from .files import BytesFile, FileTooLargeError, FileView, MadeView, RegionArray, RegionFile
from .xattrs import array_attributes, group_attributes, views_attribute

__all__ = ["BytesFile", "ChunkNames", "FileTooLargeError", "FileView", "MadeView", "RegionArray",
           "RegionFile", "array_attributes", "group_attributes", "views_attribute"]
