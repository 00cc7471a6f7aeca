"""How an array's axes lie in an MRC2014 file: columns, rows and sections (fastest first)
and which of the map's X, Y, Z each runs along; an image, an image stack, a volume or a
volume stack. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from ..files import CannotHold
from ..placement import Placement

__all__ = ["IMAGE_STACK", "VOLUME", "VOLUME_STACK", "MrcLayout", "layout_of"]

# The space groups MRC2014 gives them (ISPG)
IMAGE_STACK, VOLUME, VOLUME_STACK = 0, 1, 401
_INT32_MAX = 2**31 - 1
_NOT_SPACE = ("time", "channel")


@dataclass(frozen=True)
class MrcLayout:
    counts: tuple[int, int, int]  # nx, ny, nz: columns, rows, sections (all the stack's)
    sampling: tuple[int, int, int]  # mx, my, mz: voxels along X, Y, Z (mz: a volume's sections)
    axis_map: tuple[int, int, int]  # mapc, mapr, maps: the map axis (1 X, 2 Y, 3 Z) each runs along
    space_group: int
    spatial: int  # how many of the array's last axes are X, Y (, Z)


def layout_of(shape: tuple[int, ...], fortran: bool, placement: Placement) -> MrcLayout:
    """X is the array's last axis, Y the one before, Z (a volume's) the one before that; a
    stack's images or volumes are its first axis. In Fortran order `data`'s columns run along
    the array's first axis: an image's or a volume's axes are mapped in reverse; a stack's
    images would not be contiguous, so there is none."""
    if 0 in shape:
        raise CannotHold(f"MRC has no empty dimensions: shape {list(shape)}")
    if len(shape) == 2:
        made = MrcLayout((shape[1], shape[0], 1), (shape[1], shape[0], 1), (1, 2, 3), IMAGE_STACK, 2)
    elif len(shape) == 3 and _is_stack(placement):
        made = MrcLayout((shape[2], shape[1], shape[0]), (shape[2], shape[1], 1), (1, 2, 3), IMAGE_STACK, 2)
    elif len(shape) == 3:
        made = MrcLayout((shape[2], shape[1], shape[0]), (shape[2], shape[1], shape[0]), (1, 2, 3), VOLUME, 3)
    elif len(shape) == 4:
        counts = (shape[3], shape[2], shape[0] * shape[1])  # (sections: every volume's, one after another)
        made = MrcLayout(counts, (shape[3], shape[2], shape[1]), (1, 2, 3), VOLUME_STACK, 3)
    else:
        raise CannotHold(f"MRC holds images, volumes and their stacks (2 to 4 dimensions), not {len(shape)}")
    if max(made.counts) > _INT32_MAX:
        raise CannotHold(f"MRC counts sections in 32 bits: shape {list(shape)}")
    return _in_fortran_order(made) if fortran else made


def _is_stack(placement: Placement) -> bool:
    """Whether a 3-D array's first axis is not space (OME-Zarr's axis types say so)."""
    axes = placement.axes
    return axes is not None and axes[0].type in _NOT_SPACE


def _in_fortran_order(layout: MrcLayout) -> MrcLayout:
    if layout.space_group != VOLUME and layout.counts[2] != 1:
        raise CannotHold("in Fortran order a stack's images are not contiguous in data")
    count = layout.spatial
    counts = (*layout.counts[:count][::-1], *layout.counts[count:])
    axis_map = (*layout.axis_map[:count][::-1], *layout.axis_map[count:])
    return MrcLayout((counts[0], counts[1], counts[2]), layout.sampling,
                     (axis_map[0], axis_map[1], axis_map[2]), layout.space_group, count)
