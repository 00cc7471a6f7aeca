"""The NIfTI header of an array that keeps none of its own: voxel sizes, origin and axis
directions from the array's placement (OME-Zarr's scale and translation, or evenly spaced CF
coordinates), in a unit NIfTI has (metre, millimetre, micron; second, millisecond,
microsecond) converted from the units of OME-Zarr's axes, and CF packing as NIfTI's scaling.
Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from ..placement import Axis, Placement, in_metres, in_seconds
from .records import new_record
from .voxels import SPATIAL_AXES, Made, Voxels, in_file_order, write_voxels

__all__ = ["ALIGNED", "generic_header"]

# NIFTI_XFORM_ALIGNED_ANAT: the code nibabel and nifti-zarr give an affine made from
# spacings, with no scanner behind it.
ALIGNED = 2
# (size of the unit in metres or seconds, xyzt_units code), largest first
Units = tuple[tuple[float, int], ...]
_LENGTHS: Units = ((1.0, 1), (1e-3, 2), (1e-6, 3))
_TIMES: Units = ((1.0, 8), (1e-3, 16), (1e-6, 24))
_TIME_AXIS = 3
_TIME_UNIT_BITS = 0x38
T = TypeVar("T")


def generic_header(placement: Placement, shape: tuple[int, ...], fortran: bool) -> Made:
    rank = len(shape)
    spacing = _nifti_order(placement.spacing, rank, 1.0)
    origin = _nifti_order(placement.origin, rank, 0.0)
    flipped = _nifti_order(placement.flipped, rank, False)
    factors, units = _unit_factors(_nifti_order(placement.axes, rank, Axis()))
    sizes = tuple(float(s) * f for s, f in zip(spacing, factors, strict=True))
    affine = np.eye(4)
    for axis in range(min(rank, SPATIAL_AXES)):
        affine[axis, axis] = -sizes[axis] if flipped[axis] else sizes[axis]
        affine[axis, 3] = float(origin[axis]) * factors[axis]
    record = new_record()
    placed = any(known is not None for known in (placement.spacing, placement.origin, placement.flipped))
    record["qform_code"] = record["sform_code"] = ALIGNED if placed else 0
    record["xyzt_units"] = units
    if rank > _TIME_AXIS and units & _TIME_UNIT_BITS:  # (a time axis: where its counting starts)
        record["toffset"] = float(origin[_TIME_AXIS]) * factors[_TIME_AXIS]
    _scaling(record, placement)
    write_voxels(record, in_file_order(Voxels(shape[::-1], sizes, affine, affine), fortran))
    return Made(record, version=1)


def _nifti_order(values: Sequence[T] | None, rank: int, unknown: T) -> tuple[T, ...]:
    return tuple(values[::-1]) if values is not None and len(values) == rank else (unknown,) * rank


def _unit_factors(axes: tuple[Axis, ...]) -> tuple[list[float], int]:
    """What each axis's spacing is multiplied by to be in the units NIfTI is told of (space:
    the first three axes; time: the fourth), and `xyzt_units`."""
    factors = [1.0] * len(axes)
    space = _convert(factors, {i: in_metres(axis.unit) for i, axis in enumerate(axes[:SPATIAL_AXES])},
                     _LENGTHS)
    time = _convert(factors, {_TIME_AXIS: in_seconds(axes[_TIME_AXIS].unit)} if len(axes) > _TIME_AXIS
                    else {}, _TIMES)
    return factors, space | time


def _convert(factors: list[float], sizes: dict[int, float | None], table: Units) -> int:
    """Into `factors`, the axes' factors to the largest unit of `table` that is no larger
    than their smallest unit (so no size turns into a tiny fraction); its code (0: none of the
    axes has a unit known here, and they are left as they are)."""
    known = {axis: size for axis, size in sizes.items() if size is not None}
    if not known:
        return 0
    unit, code = next(((u, c) for u, c in table if min(known.values()) >= u), table[-1])
    for axis, size in known.items():
        factors[axis] = size / unit
    return code


def _scaling(record: Any, placement: Placement) -> None:
    """CF packing (value = stored * scale_factor + add_offset) is NIfTI's scl_slope/scl_inter."""
    if placement.scale is not None or placement.offset is not None:
        record["scl_slope"] = 1.0 if placement.scale is None else placement.scale
        record["scl_inter"] = placement.offset or 0.0
