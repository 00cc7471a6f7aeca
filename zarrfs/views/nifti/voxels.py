"""Where a NIfTI header's voxels are: their counts and sizes along each axis and the qform
and sform affines of the first three, first in NIfTI's order of the array's axes (its C
order reversed: x fastest), then in the order of `data` as the mount lays it out. Pure."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .qform import qform_of
from .records import Extension

__all__ = ["SPATIAL_AXES", "Made", "Voxels", "in_file_order", "write_voxels"]

SPATIAL_AXES = 3  # (NIfTI's first three axes are space, the fourth time)


@dataclass(frozen=True)
class Voxels:
    dims: tuple[int, ...]
    sizes: tuple[float, ...]  # pixdim, one per axis
    qform: np.ndarray | None  # 4x4: indices along the first three axes -> world (None: not stated)
    sform: np.ndarray | None


@dataclass(frozen=True)
class Made:
    """A header with its voxels written, before its type and version are."""

    record: Any  # records.NIFTI2
    version: int  # the least version that may be written (1: whichever fits)
    extensions: tuple[Extension, ...] = ()


def in_file_order(voxels: Voxels, fortran: bool) -> Voxels:
    """In Fortran order `data`'s fastest axis is the array's first, NIfTI order's last: the
    axes are reversed, and the affines map the new first three to where the old ones were.
    That needs the new first three to be among the old ones (rank 3 at most); past that the
    header states no affine: NIfTI's first three axes must be its spatial ones."""
    if not fortran:
        return voxels
    rank = len(voxels.dims)
    reordered = replace(voxels, dims=voxels.dims[::-1], sizes=voxels.sizes[::-1])
    if rank > SPATIAL_AXES:
        return replace(reordered, qform=None, sform=None)
    swap = np.eye(4)
    swap[:rank, :rank] = np.eye(rank)[::-1]  # (file axis k is NIfTI axis rank-1-k)
    return replace(reordered, qform=None if voxels.qform is None else voxels.qform @ swap,
                   sform=None if voxels.sform is None else voxels.sform @ swap)


def write_voxels(record: Any, voxels: Voxels) -> None:
    """Dimensions, voxel sizes and both affines into the header (an affine not stated keeps
    its code 0)."""
    rank = len(voxels.dims)
    record["dim"] = [rank, *voxels.dims, *[1] * (7 - rank)]
    pixdim = [1.0, *voxels.sizes, *[1.0] * (7 - rank)]
    if voxels.qform is None:
        record["qform_code"] = 0
    else:
        qform = qform_of(voxels.qform)
        pixdim[0] = qform.qfac
        record["quatern"], record["qoffset"] = qform.quatern, qform.offset
    record["pixdim"] = pixdim
    if voxels.sform is None:
        record["sform_code"] = 0
    else:
        record["sform"] = voxels.sform[:3]
