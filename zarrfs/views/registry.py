"""The files beside an array's `data`, for legacy tools, by view kind (the names of the
`views=` mount option): headers over `data`'s bytes, and files made from the array's chunks
(`data.tif`, `data.h5`); the kinds of a group's views. It imports the format families,
through their faces (of the view contract, only it and the array directory may).

A new view format is its family (a subpackage of `views/`) and one line here: in
`HEADER_VIEWS` for a header, in `ARRAY_FILE_VIEWS` for a file of its own made from the array,
in `GROUP_FILE_VIEWS` for a file of a whole group, with the mount options the family declares
(gathered in `FAMILY_OPTIONS`): the mount's options, the array directory and the tree read the
names, makers, options and sharing from here, and the family reads its options' values itself
(`FileForm.options`). The tree names no family: what it needs of one (the files of an array
of strings, the `.npy` files it makes arrays of) it takes from here too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..declared import Option
from . import hdf5, headers, netcdf, tiff
from .files import FileForm, FileView, MadeView
from .fits import FITS_NAME, fits_file, fits_header
from .group_files import PyramidViews
from .hdf5 import (
    H5_KIND,
    H5_NAME,
    H5GroupViews,
    VariableStrings,
    array_h5_file,
    shows_h5,
    shows_strings_h5,
    strings_h5_file,
)
from .headered import HeaderedFile
from .headers import BadNpyHeader, NpyHeader, npy_header_length, parse_npy_header
from .mrc import MRC_NAME, mrc_header
from .netcdf import NC_NAME, NcGroupViews
from .nifti import NII_NAME, nifti_header
from .placement import Placement
from .region_file import RegionFile
from .text import TEXT_NAME, TextFile
from .tiff import OME_TIFF_NAME, GeoTiffViews, OmeTiffViews, shows_array_tiff, tiff_file

# (BadNpyHeader, NpyHeader, npy_header_length, parse_npy_header: what the tree takes of the npy
# family, as arrays are made by writing .npy files into a group)
__all__ = ["ARRAY_FILE_VIEWS", "FAMILY_OPTIONS", "GROUP_FILE_VIEWS", "GROUP_VIEWS", "HEADER_VIEWS",
           "SHARING_DATA", "VIEWS", "VIEW_KINDS", "ArrayFileView", "BadNpyHeader", "GroupFileView",
           "HeaderView", "NpyHeader", "npy_header_length", "parse_npy_header", "string_array_files"]

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
    options: tuple[Option[Any], ...] = ()  # (the mount options the family declares)

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
    options: tuple[Option[Any], ...] = ()  # (the mount options the family declares)


ARRAY_FILE_VIEWS: dict[str, ArrayFileView] = {
    "tif": ArrayFileView("data.tif", shows_array_tiff, tiff_file, tiff.OPTIONS),
    "h5": ArrayFileView(H5_NAME, shows_h5, array_h5_file, hdf5.OPTIONS),
}


@dataclass(frozen=True)
class GroupFileView:
    """The files of one kind that show a whole group, in its directory (`tree.group_views`)."""

    # (what the tree offers them, the kinds `-o views=` shows, how the mount's files hold
    # arrays) -> the kind's files
    make: Callable[[Any, frozenset[str], FileForm], PyramidViews]
    options: tuple[Option[Any], ...] = ()  # (the mount options the family declares)


# In the order of their names in a directory (a name two kinds give is the first's).
GROUP_FILE_VIEWS: tuple[GroupFileView, ...] = (
    GroupFileView(NcGroupViews, netcdf.OPTIONS),
    GroupFileView(OmeTiffViews, tiff.OPTIONS),
    GroupFileView(GeoTiffViews, tiff.OPTIONS),
    GroupFileView(H5GroupViews, hdf5.OPTIONS),
)
# The kinds of the group views: kind -> the file's name (those sharing an array file's kind,
# h5 and tif, are in the array files').
GROUP_VIEWS = {"nc": NC_NAME, "ome": OME_TIFF_NAME}
VIEW_KINDS = frozenset(HEADER_VIEWS) | frozenset(ARRAY_FILE_VIEWS) | frozenset(GROUP_VIEWS)
# The files whose bytes are also `data`'s (a write to one makes the others stale).
SHARING_DATA = (*(view.file_name for view in HEADER_VIEWS.values() if view.shares_data),
                *(view.file_name for view in ARRAY_FILE_VIEWS.values()))
# The mount options the view families declare, from their lines above, once each.
_LINES: tuple[HeaderView | ArrayFileView | GroupFileView, ...] = (
    *HEADER_VIEWS.values(), *ARRAY_FILE_VIEWS.values(), *GROUP_FILE_VIEWS)
FAMILY_OPTIONS: tuple[Option[Any], ...] = tuple(dict.fromkeys(
    option for view in _LINES for option in view.options))


def _parse_views(text: str) -> frozenset[str]:
    """`npy:nrrd` (colon-separated: -o itself splits on commas), or `none`."""
    if text == "none":
        return frozenset()
    names = frozenset(text.split(":"))
    if not names <= VIEW_KINDS:
        raise ValueError(text)
    return names


VIEWS = Option(
    "views", "list", VIEW_KINDS,
    "which views to show beside `data`; `nii`: `data.nii`, `mrc`: `data.mrc`, `fits`: `data.fits`; `h5`: "
    "`data.h5` in array and group directories, `nc`: `data.nc` in group directories, `ome`: `data.ome.tif` "
    "in OME-Zarr image directories (colon-separated; default all)",
    (":".join((*HEADER_VIEWS, *ARRAY_FILE_VIEWS, *GROUP_VIEWS)), "none"), _parse_views)


def string_array_files(array: Any, views: frozenset[str]) -> tuple[dict[str, FileView], Any]:
    """The files of an array of strings or bytes of no fixed size (which has no `data`), by
    name, for the kinds `views` the mount shows; and its strings as a group's data.h5 reads
    them too (None: that file cannot show them)."""
    files: dict[str, FileView] = {TEXT_NAME: TextFile(array)}
    source = VariableStrings(array) if shows_strings_h5(array) else None
    if H5_KIND in views and source is not None:
        files[H5_NAME] = strings_h5_file(source)
    return files, source
