"""`data.nii`: a single-file NIfTI of the array, its header then `data`'s bytes (x fastest:
the array's last axis, or its first in Fortran order), as NIfTI-1, or NIfTI-2 where a
dimension passes NIfTI-1's 32,767. In the mount's byte order: NIfTI states it by the order of
its own header, which readers detect. Pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..files import CannotHold
from ..placement import Placement
from .generic import generic_header
from .records import encode
from .stored import level_header

__all__ = ["NII_NAME", "nifti_header"]

NII_NAME = "data.nii"
_MAX_RANK = 7
_NIFTI1_MAX_DIM = 2**15 - 1
_TYPES = {  # (kind, itemsize) -> NIfTI datatype code; bool as uint8
    ("u", 1): 2, ("b", 1): 2, ("i", 2): 4, ("i", 4): 8, ("f", 4): 16, ("c", 8): 32, ("f", 8): 64,
    ("i", 1): 256, ("u", 2): 512, ("u", 4): 768, ("i", 8): 1024, ("u", 8): 1280, ("c", 16): 1792,
}
_RGB = {("r", "g", "b"): 128, ("r", "g", "b", "a"): 2304}  # (RGB24, RGBA32: a byte a channel)


def nifti_header(dtype: np.dtype[Any], shape: tuple[int, ...], fortran: bool,
                 where: Callable[[], Placement]) -> bytes:
    """The header (with its extensions) that `data`'s bytes follow in `data.nii`."""
    code = _datatype(dtype)
    if not 1 <= len(shape) <= _MAX_RANK:
        raise CannotHold(f"NIfTI holds 1 to {_MAX_RANK} dimensions, not {len(shape)}")
    if 0 in shape:
        raise CannotHold(f"NIfTI has no empty dimensions: shape {list(shape)}")
    placement = where()
    made = level_header(placement, shape, fortran) or generic_header(placement, shape, fortran)
    record = made.record
    record["datatype"], record["bitpix"] = code, dtype.itemsize * 8
    version = 2 if made.version == 2 or max(record["dim"][1:]) > _NIFTI1_MAX_DIM else 1
    return encode(record, version, ">" if dtype.str.startswith(">") else "<", made.extensions)


def _datatype(dtype: np.dtype[Any]) -> int:
    if dtype.names is not None:
        fields = [dtype.fields[name] for name in dtype.names] if dtype.fields else []
        code = _RGB.get(tuple(dtype.names))
        if code is None or any(field[0] != np.uint8 for field in fields) or dtype.itemsize != len(fields):
            raise CannotHold(f"NIfTI has no records of {dtype} (only RGB and RGBA of a byte each)")
        return code
    code = _TYPES.get((dtype.kind, dtype.itemsize)) if dtype.subdtype is None else None
    if code is None:
        raise CannotHold(f"NIfTI has no {dtype} elements")
    return code
