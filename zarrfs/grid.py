"""Pure index math over regular grids: boxes, their intersections with chunks, and the flat
C-order ranges of a box. No I/O; every function is easy to test on its own."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import product

Index = tuple[int, ...]


@dataclass(frozen=True)
class Box:
    """The half-open hyperrectangle [start, stop) in array coordinates."""

    start: Index
    stop: Index

    @property
    def shape(self) -> Index:
        return tuple(b - a for a, b in zip(self.start, self.stop, strict=True))

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def slices(self, origin: Sequence[int] | None = None) -> tuple[slice, ...]:
        """The slices selecting this box from an array whose element 0 is at `origin`."""
        if origin is None:
            return tuple(slice(a, b) for a, b in zip(self.start, self.stop, strict=True))
        return tuple(
            slice(a - o, b - o) for a, b, o in zip(self.start, self.stop, origin, strict=True)
        )


@dataclass(frozen=True)
class Piece:
    """The part of a box that lies in one grid cell."""

    cell: Index  # the cell's grid index
    in_cell: tuple[slice, ...]  # where the part lies inside the cell
    in_box: tuple[slice, ...]  # where it lies inside the box


def cells_touched(box: Box, cell_shape: Sequence[int]) -> Iterator[Index]:
    """Every grid cell a box touches, in C order (`cells_of` without the parts: cheaper)."""
    return product(*(range(a // c, -(-b // c)) if b > a else range(0)
                     for a, b, c in zip(box.start, box.stop, cell_shape, strict=True)))


def cells_of(box: Box, cell_shape: Sequence[int]) -> Iterator[Piece]:
    """Every grid cell a box touches, in C order, with the part of the box inside it."""
    for cell in cells_touched(box, cell_shape):
        yield piece_of(cell, box, cell_shape)


def piece_of(cell: Index, box: Box, cell_shape: Sequence[int]) -> Piece:
    """The part of `box` inside the grid cell `cell` (one it touches)."""
    in_cell, in_box = [], []
    for i, a, b, c in zip(cell, box.start, box.stop, cell_shape, strict=True):
        lo, hi = max(a, i * c), min(b, (i + 1) * c)
        in_cell.append(slice(lo - i * c, hi - i * c))
        in_box.append(slice(lo - a, hi - a))
    return Piece(cell, tuple(in_cell), tuple(in_box))


def extent_inside(cell: Sequence[int], cell_shape: Sequence[int], shape: Sequence[int]) -> Index:
    """How much of a grid cell lies inside an array of `shape`, along each axis (an edge
    cell's overhang is the rest)."""
    return tuple(max(0, min(c, n - i * c)) for i, c, n in zip(cell, cell_shape, shape, strict=True))


def flat_boxes(shape: Sequence[int], first: int, last: int) -> list[Box]:
    """Split the C-order element range [first, last) of an array of `shape` into boxes.

    Each box is contiguous in C order and they follow each other, so a buffer for the whole
    range is the boxes' buffers laid end to end. At most 2 * rank - 1 boxes."""
    rank = len(shape)
    if last <= first:
        return []
    if rank == 0:
        return [Box((), ())]
    strides = [math.prod(shape[d + 1 :]) for d in range(rank)]
    boxes: list[Box] = []
    position = first
    while position < last:
        box = _largest_box_at(shape, strides, position, last)
        boxes.append(box)
        position += box.size
    return boxes


def _largest_box_at(shape: Sequence[int], strides: Sequence[int], position: int, last: int) -> Box:
    """The largest box starting at flat `position`, contiguous, ending at or before `last`."""
    coords = unravel(position, shape)
    rank = len(shape)
    # Find the outermost dimension d such that coords in all dimensions after d are 0,
    # and the run along d fits before `last`.
    for d in range(rank):
        if any(coords[e] != 0 for e in range(d + 1, rank)):
            continue
        count = min(shape[d] - coords[d], (last - position) // strides[d])
        if count >= 1:
            stop = (*(c + 1 for c in coords[:d]), coords[d] + count, *shape[d + 1 :])
            return Box(coords, stop)
    raise AssertionError("unreachable: the innermost dimension always fits one element")


def cell_count(shape: Sequence[int], cell_shape: Sequence[int]) -> int:
    """How many cells of `cell_shape` cover `shape` (edge cells partial; a scalar: one)."""
    return math.prod(-(-n // c) for n, c in zip(shape, cell_shape, strict=True))


def unravel(position: int, shape: Sequence[int]) -> Index:
    coords = []
    for n in reversed(shape):
        position, r = divmod(position, n)
        coords.append(r)
    return tuple(reversed(coords))
