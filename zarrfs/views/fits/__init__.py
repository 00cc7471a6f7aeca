"""`data.fits`: the array as a FITS primary image (astropy, CFITSIO, DS9, CASA's viewers), its
header (`header`: the card rules in `cards`, the WCS in `wcs` and `sky`, the attributes in
`keywords`) over `data`'s elements in big-endian order (`file`)."""

from .file import FitsFile, fits_file
from .header import fits_header

FITS_NAME = "data.fits"

__all__ = ["FITS_NAME", "FitsFile", "fits_file", "fits_header"]
