"""The files beside an array's `data`, for legacy tools, by view kind (the names of the
`views=` mount option): headers over `data`'s bytes, and files made from the array's chunks
(`data.tif`, `data.h5`); the kinds of a group's views. It imports the format families,
through their faces (of the view contract, only it and the array directory may).

A new view format is its family (a subpackage of `views/`) and one line here: in
`HEADER_VIEWS` for a header, in `ARRAY_FILE_VIEWS` for a file of its own made from the array:
the mount option, the array directory and the tree read the names, makers and sharing from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import headers
from .files import FileForm, FileView, MadeView, RegionFile
from .fits import FITS_NAME, fits_file, fits_header
from .hdf5 import H5_NAME, array_h5_file, shows_h5
from .headered import HeaderedFile
from .mrc import MRC_NAME, mrc_header
from .netcdf import NC_NAME
from .nifti import NII_NAME, nifti_header
from .placement import Placement
from .tiff import OME_TIFF_NAME, shows_array_tiff, tiff_file

# (file dtype, the array's shape in C order, whether `data` is in Fortran order (its axes
# reversed), where the elements are: asked only when the header needs it, as it may read
# coordinate arrays) -> the header's bytes, or None when the format cannot describe the array
# (or raises files.CannotHold saying why, for the log).
Maker = Callable[[np.dtype[Any], tuple[int, ...], bool, Callable[[], Placement]], "bytes | None"]
# (`data`, the header's bytes now) -> the file holding the header then `data`'s bytes.
WithData = Callable[[RegionFile, Callable[[], "bytes | None"]], FileView]


@dataclass(frozen=True)
class HeaderView:
    file_name: str
    make: Maker
    # None: the file is its header alone; else the file also holds `data`'s bytes (so a
    # write to one makes the other stale in the kernel's cache).
    with_data: WithData | None = None

    @property
    def shares_data(self) -> bool:
        return self.with_data is not None


# The NRRD header's base name is no other file's: Bio-Formats (Fiji, QuPath, OMERO) opens any
# `X` or `X.*` beside an `X.nhdr` as that NRRD, before trying TIFF (a `data.nhdr` took
# `data.tif`).
HEADER_VIEWS: dict[str, HeaderView] = {
    "npy": HeaderView("data.npy", lambda dtype, shape, fortran, _: headers.npy_header(dtype, shape, fortran),
                      HeaderedFile),
    "nrrd": HeaderView("data.raw.nhdr", lambda dtype, shape, fortran, where: headers.nrrd_header(
        dtype, shape, fortran, placement=where())),
    "mhd": HeaderView("data.mhd", lambda dtype, shape, fortran, where: headers.mhd_header(
        dtype, shape, fortran, placement=where())),
    "vrt": HeaderView("data.vrt", lambda dtype, shape, fortran, where: headers.vrt_header(
        dtype, shape, fortran, placement=where())),
    # (the header, then data's bytes: writable as data.npy is)
    "nii": HeaderView(NII_NAME, nifti_header, HeaderedFile),
    "mrc": HeaderView(MRC_NAME, mrc_header, HeaderedFile),
    # (the header, data's bytes big-endian, zeros to a whole block: read-only)
    "fits": HeaderView(FITS_NAME, fits_header, fits_file),
}


@dataclass(frozen=True)
class ArrayFileView:
    """A file made from the array itself (its chunks), not a header over `data`'s bytes."""

    file_name: str
    shows: Callable[[Any], bool]  # (the array) -> whether the format can hold it
    # (the array, how the mount's files hold it, where its elements are) -> the file
    make: Callable[[Any, FileForm, Callable[[], Placement]], MadeView]


ARRAY_FILE_VIEWS: dict[str, ArrayFileView] = {
    "tif": ArrayFileView("data.tif", shows_array_tiff, tiff_file),
    "h5": ArrayFileView(H5_NAME, shows_h5, array_h5_file),
}
# Views of a whole group, in its directory (`tree.group_views`): kind -> the file's name.
GROUP_VIEWS = {"nc": NC_NAME, "ome": OME_TIFF_NAME}
VIEW_KINDS = frozenset(HEADER_VIEWS) | frozenset(ARRAY_FILE_VIEWS) | frozenset(GROUP_VIEWS)
# The files whose bytes are also `data`'s (a write to one makes the others stale).
SHARING_DATA = (*(view.file_name for view in HEADER_VIEWS.values() if view.shares_data),
                *(view.file_name for view in ARRAY_FILE_VIEWS.values()))
