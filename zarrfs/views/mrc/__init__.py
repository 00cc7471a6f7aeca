"""`data.mrc` (MRC2014): a 1024-byte header made from the array's type, shape and placement,
then `data`'s bytes. The face: the file's name and the maker of its header (`views.registry`
pairs it with the file that follows it with `data`)."""

from .header import MRC_NAME, mrc_header

__all__ = ["MRC_NAME", "mrc_header"]
