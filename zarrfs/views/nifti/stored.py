"""The header of a level of a NIfTI-Zarr image (neuroscales' nifti-zarr: an OME-Zarr image
whose `nifti` array holds the header of the NIfTI file it was made from, extensions included),
read from the level's surroundings: the array beside it, read whole, and its group's OME-Zarr
metadata, which say which level is the finest and where its voxels are. The finest level's
is that header as stored (affine, qform and sform codes, description, intent, scaling,
extensions); a coarser level's is the same with its own voxels, as nifti-zarr's own `zarr2nii`
makes it: both affines composed with the map from the level's voxels to the finest level's
(the ratio of their OME-Zarr scales, the difference of their translations). Pure."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..placement import NOWHERE, Axis, Placement, ome_finest_level, ome_placement
from .qform import Qform, affine_of
from .records import Parsed, parse
from .voxels import SPATIAL_AXES, Made, Voxels, in_file_order, write_voxels

__all__ = ["NIFTI_HEADER_ARRAY", "StoredHeader", "level_header", "stored_header"]

log = logging.getLogger(__name__)

_NIFTI_AXES = "xyztc"  # (NIfTI's order of an image's axes, fastest first)
_SLICE_FIELDS = ("slice_start", "slice_end", "slice_code", "slice_duration")
NIFTI_HEADER_ARRAY = "nifti"  # (NIfTI-Zarr's name of the array beside the levels)
MAX_STORED_HEADER_BYTES = 1 << 20


@dataclass(frozen=True)
class StoredHeader:
    """The header of the NIfTI file an image was made from, and where the elements of the
    level it describes (the finest) are."""

    contents: bytes
    finest: Placement


def stored_header(placement: Placement, rank: int) -> StoredHeader | None:
    """The header a NIfTI-Zarr image keeps beside its levels, when the array is one of them
    (a 1-D array of bytes named `nifti` in its group, at most `MAX_STORED_HEADER_BYTES`)."""
    around = placement.surroundings
    finest = ome_finest_level(around.group_attributes, around.name) if around and around.name else None
    if around is None or finest is None:
        return None
    values = around.sibling(NIFTI_HEADER_ARRAY, MAX_STORED_HEADER_BYTES)
    if values is None or values.ndim != 1 or values.dtype != np.uint8:
        return None
    return StoredHeader(values.tobytes(), ome_placement(around.group_attributes, finest, rank) or NOWHERE)


@dataclass(frozen=True)
class Steps:
    """Along each spatial axis (NIfTI order): how many of the finest level's voxels one of
    the level's is, and where the level's first voxel is among them."""

    zooms: tuple[float, ...] = (1.0,) * SPATIAL_AXES
    shifts: tuple[float, ...] = (0.0,) * SPATIAL_AXES


FINEST = Steps()


def level_header(placement: Placement, shape: tuple[int, ...], fortran: bool) -> Made | None:
    """The stored header made the level's (None: the array has none, or it does not fit the
    level, which is then said in the log)."""
    stored = stored_header(placement, len(shape))
    if stored is None:
        return None
    fitted = _fit(placement, stored.contents, stored.finest, shape, fortran)
    if fitted is None:
        log.info("a NIfTI-Zarr level of shape %s: its image's stored NIfTI header does not describe it"
                 " (made from its OME-Zarr metadata instead)", list(shape))
        return None
    parsed, dims, steps = fitted
    record = parsed.record.copy()
    if fortran or steps != FINEST:
        _place_level(record, dims, steps, fortran)
    else:
        record["dim"] = [len(dims), *dims, *[1] * (7 - len(dims))]
    return Made(record, parsed.version, parsed.extensions)


def _fit(placement: Placement, contents: bytes, finest: Placement, shape: tuple[int, ...],
         fortran: bool) -> tuple[Parsed, tuple[int, ...], Steps] | None:
    parsed = parse(contents)
    steps = _steps_from_finest(placement, finest, len(shape))
    if parsed is None or steps is None:
        return None
    dims = _fitted_dims(parsed.record, shape, placement.axes, steps == FINEST)
    if dims is None or (fortran and len(dims) != len(shape)):  # (Fortran order: no axis added)
        return None
    return parsed, dims, steps


def _fitted_dims(record: Any, shape: tuple[int, ...], axes: tuple[Axis, ...] | None,
                 finest: bool) -> tuple[int, ...] | None:
    """The level's dimensions as the header states them: its three spatial ones (the finest
    level's are the header's), then the header's others (so a singleton time axis the array
    leaves out is kept), when they hold the level's elements in the level's order."""
    rank = int(record["dim"][0])
    if not 1 <= rank <= 7:
        return None
    level, stated = shape[::-1], tuple(int(n) for n in record["dim"][1 : 1 + rank])
    dims = (*level[:SPATIAL_AXES], *stated[SPATIAL_AXES:])
    if [n for n in dims if n != 1] != [n for n in level if n != 1] or (finest and dims != stated):
        return None
    if axes is not None:  # (nifti-zarr's 5-D arrays are t, c, z, y, x; NIfTI's x, y, z, t, c)
        names = [(axis.name or "").lower() for axis, n in zip(axes[::-1], level, strict=True) if n != 1]
        known = [_NIFTI_AXES.index(name) for name in names if name and name in _NIFTI_AXES]
        if known != sorted(known):
            return None
    return dims


def _steps_from_finest(placement: Placement, finest: Placement, rank: int) -> Steps | None:
    if (placement.spacing, placement.origin) == (finest.spacing, finest.origin):
        return FINEST
    if placement.spacing is None or finest.spacing is None:
        return None
    zooms, shifts = [1.0] * SPATIAL_AXES, [0.0] * SPATIAL_AXES
    for axis in range(min(rank, SPATIAL_AXES)):
        c_axis = rank - 1 - axis
        base = finest.spacing[c_axis]
        zooms[axis] = placement.spacing[c_axis] / base
        shifts[axis] = (_at(placement.origin, c_axis) - _at(finest.origin, c_axis)) / base
    if not all(math.isfinite(v) and v > 0 for v in zooms) or not all(math.isfinite(v) for v in shifts):
        return None
    return Steps(tuple(zooms), tuple(shifts))


def _at(origin: tuple[float, ...] | None, axis: int) -> float:
    return 0.0 if origin is None else origin[axis]


def _place_level(record: Any, dims: tuple[int, ...], steps: Steps, fortran: bool) -> None:
    """Both affines composed with the level's voxels -> the finest level's voxels."""
    to_finest = np.eye(4)
    to_finest[:SPATIAL_AXES, :SPATIAL_AXES] = np.diag(steps.zooms)
    to_finest[:SPATIAL_AXES, 3] = steps.shifts
    pixdim = [float(v) if v > 0 else 1.0 for v in record["pixdim"][1 : 1 + max(len(dims), SPATIAL_AXES)]]
    quatern, offset = (tuple(float(v) for v in record[name]) for name in ("quatern", "qoffset"))
    stored_qform = affine_of(Qform((quatern[0], quatern[1], quatern[2]), float(record["pixdim"][0]),
                                   (offset[0], offset[1], offset[2])), (pixdim[0], pixdim[1], pixdim[2]))
    sform = np.vstack([record["sform"], [0.0, 0.0, 0.0, 1.0]])
    sizes = tuple(size * (steps.zooms[axis] if axis < SPATIAL_AXES else 1.0)
                  for axis, size in enumerate(pixdim[: len(dims)]))
    if steps != FINEST:  # (slice timing is of the finest level's slices)
        for name in _SLICE_FIELDS:
            record[name] = 0
    write_voxels(record, in_file_order(Voxels(dims, sizes, stored_qform @ to_finest, sform @ to_finest),
                                       fortran))
