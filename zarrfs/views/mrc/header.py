"""`data.mrc`: an MRC2014 file of the array, its 1024-byte header then `data`'s bytes, in the
mount's byte order (the machine stamp says which). Voxel sizes in ångström from the array's
placement (OME-Zarr's scale, in the units its axes name), the origin from its translation;
statistics marked as not determined (working them out would read the whole array). Pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from ..files import CannotHold
from ..placement import Placement, in_metres
from .layout import MrcLayout, layout_of

__all__ = ["MRC_NAME", "mrc_header"]

MRC_NAME = "data.mrc"
HEADER = np.dtype([
    ("nx", "i4"), ("ny", "i4"), ("nz", "i4"), ("mode", "i4"), ("nxstart", "i4"), ("nystart", "i4"),
    ("nzstart", "i4"), ("mx", "i4"), ("my", "i4"), ("mz", "i4"), ("cella", "f4", (3,)),
    ("cellb", "f4", (3,)), ("mapc", "i4"), ("mapr", "i4"), ("maps", "i4"), ("dmin", "f4"),
    ("dmax", "f4"), ("dmean", "f4"), ("ispg", "i4"), ("nsymbt", "i4"), ("extra1", "V8"),
    ("exttyp", "S4"), ("nversion", "i4"), ("extra2", "V84"), ("origin", "f4", (3,)), ("map", "S4"),
    ("machst", "u1", (4,)), ("rms", "f4"), ("nlabl", "i4"), ("label", "S80", (10,)),
])
_MODES = {("i", 1): 0, ("i", 2): 1, ("f", 4): 2, ("c", 8): 4, ("u", 2): 6, ("f", 2): 12}
_MACHINE_STAMPS = {"<": (0x44, 0x44, 0, 0), ">": (0x11, 0x11, 0, 0)}
_VERSION = 20140
_ANGSTROM = 1e-10
_LABEL = b"zarrfs: a view of a Zarr array"


def mrc_header(dtype: np.dtype[Any], shape: tuple[int, ...], fortran: bool,
               where: Callable[[], Placement]) -> bytes:
    """The header `data`'s bytes follow in `data.mrc`."""
    mode = _MODES.get((dtype.kind, dtype.itemsize)) if dtype.names is None else None
    if mode is None:
        raise CannotHold(f"MRC has no mode for {dtype} elements (int8, int16, uint16, float16, "
                         "float32, complex64)")
    placement = where()
    layout = layout_of(shape, fortran, placement)
    order: Literal["<", ">"] = ">" if dtype.str.startswith(">") else "<"
    header = np.zeros((), HEADER.newbyteorder(order))
    header["nx"], header["ny"], header["nz"] = layout.counts
    header["mx"], header["my"], header["mz"] = layout.sampling
    header["mapc"], header["mapr"], header["maps"] = layout.axis_map
    header["mode"], header["ispg"] = mode, layout.space_group
    header["cellb"] = (90.0, 90.0, 90.0)
    voxel, origin = _in_angstrom(placement, shape, layout)
    header["cella"] = [size * count for size, count in zip(voxel, layout.sampling, strict=True)]
    header["origin"] = origin
    # Not determined, as MRC2014 says it: dmax < dmin, dmean < both, rms < 0.
    header["dmin"], header["dmax"], header["dmean"], header["rms"] = 0.0, -1.0, -2.0, -1.0
    header["nversion"], header["map"], header["machst"] = _VERSION, b"MAP ", _MACHINE_STAMPS[order]
    header["nlabl"], header["label"] = 1, [_LABEL, *[b""] * 9]
    return header.tobytes()


def _in_angstrom(placement: Placement, shape: tuple[int, ...],
                 layout: MrcLayout) -> tuple[list[float], list[float]]:
    """Voxel size and origin along X, Y, Z (the array's last axes, backwards); 0 where the
    spacing or its unit is not known (and Z of an image or image stack, which has none)."""
    sizes, origin = [0.0] * 3, [0.0] * 3
    axes, spacing = placement.axes, placement.spacing
    for xyz in range(layout.spatial):
        axis = len(shape) - 1 - xyz
        metres = in_metres(axes[axis].unit) if axes is not None else None
        if metres is None or spacing is None:
            continue
        sizes[xyz] = spacing[axis] * metres / _ANGSTROM
        origin[xyz] = placement.origin[axis] * metres / _ANGSTROM if placement.origin else 0.0
    return sizes, origin
