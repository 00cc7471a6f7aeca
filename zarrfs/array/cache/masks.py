"""Written-masks: the elements of a cached chunk that this mount wrote and has not saved.

A mask is a boolean array that broadcasts to the chunk's shape. While every write to a chunk
covers whole rows (all of the other axes, as a sequential writer of `data` writes), it holds
one flag per row, shaped (rows, 1, ...); after any other write, one flag per element. numpy
broadcasting makes both work wherever a mask is used: merging with a stored chunk
(`np.copyto(..., where=mask)`) and combining the masks of a failed write-back (`|`). Keeping a
mask per element cost a sequential writer 40% of its request time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def mark(mask: np.ndarray | None, in_cell: Sequence[slice],
         chunk_shape: Sequence[int]) -> tuple[np.ndarray, int]:
    """`mask` (a new one when None, one per element when the write needs it) with the
    elements of `in_cell` set, and how many of them were not set before."""
    rows = _whole_rows(in_cell, chunk_shape)
    if mask is None:
        mask = np.zeros(_row_shape(chunk_shape) if rows else tuple(chunk_shape), dtype=bool)
    elif not rows and mask.shape != tuple(chunk_shape):
        mask = np.broadcast_to(mask, tuple(chunk_shape)).copy()
    per_flag = 1
    selection: tuple[Any, ...] = (*in_cell, Ellipsis)  # a view, also at rank 0
    if mask.shape != tuple(chunk_shape):
        selection, per_flag = (in_cell[0], Ellipsis), math.prod(chunk_shape[1:])
    region = mask[selection]
    fresh = (region.size - int(np.count_nonzero(region))) * per_flag
    region[...] = True
    return mask, fresh


def covers(mask: np.ndarray, in_cell: Sequence[slice], chunk_shape: Sequence[int]) -> bool:
    """Whether `mask` is set for every element of `in_cell`."""
    selection: tuple[Any, ...] = (*in_cell, Ellipsis)
    return bool(np.broadcast_to(mask, tuple(chunk_shape))[selection].all())


def _whole_rows(in_cell: Sequence[slice], chunk_shape: Sequence[int]) -> bool:
    return len(chunk_shape) > 1 and all(
        s.start == 0 and s.stop == n for s, n in zip(in_cell[1:], chunk_shape[1:], strict=True))


def _row_shape(chunk_shape: Sequence[int]) -> tuple[int, ...]:
    return (chunk_shape[0], *(1,) * (len(chunk_shape) - 1))
