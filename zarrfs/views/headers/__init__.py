"""Headers that let legacy tools open an array's flat `data`: `formats` (the bytes of npy,
NRRD, MetaImage and VRT headers), `npy` (a .npy stream's header read back). `data.npy` is
its header over `data`'s bytes, a `views.headered.HeaderedFile`."""

from .formats import mhd_header, npy_header, nrrd_header, vrt_header
from .npy import BadNpyHeader, NpyHeader, npy_header_length, parse_npy_header

__all__ = ["BadNpyHeader", "NpyHeader", "mhd_header", "npy_header", "npy_header_length", "nrrd_header",
           "parse_npy_header", "vrt_header"]
