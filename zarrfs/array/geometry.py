"""An array's geometry: its description (shape, chunk grid, codecs, key encoding), its stored
metadata document and the read-chunk grid, as one immutable value.

A resize (or another writer's) makes a new Geometry and swaps it in with one assignment; an
operation takes one snapshot of it at its start, so it never sees the shape of one version
with the grid of another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..formats.description import ArrayDescription
from ..grid import Box, Index, Piece, cells_of, cells_touched, extent_inside
from ..rectilinear import RectilinearGrid


@dataclass(frozen=True)
class Geometry:
    description: ArrayDescription
    raw_metadata: bytes
    read_chunk_shape: Index  # the unit read and cached: the chunk, or a shard's inner chunk
    # The grid of read chunks when it is not regular (a rectilinear grid's chunks, each
    # cached in a buffer of `read_chunk_shape`, its largest edges; the rest is overhang).
    read_grid: RectilinearGrid | None = None

    @property
    def shape(self) -> Index:
        return self.description.shape

    @property
    def chunk_shape(self) -> Index:
        return self.description.chunk_shape

    @property
    def grid_shape(self) -> Index:
        return self.description.grid_shape

    def chunk_key(self, chunk: Sequence[int]) -> str:
        return self.description.chunk_key_encoding.key(chunk)

    def resized(self, shape: Index, raw_metadata: bytes) -> Geometry:
        description = self.description.resized(shape)
        read_grid = self.read_grid and description.rectilinear
        return dataclasses.replace(self, description=description, raw_metadata=raw_metadata,
                                   read_grid=read_grid)

    def described(self, description: ArrayDescription, raw_metadata: bytes) -> Geometry:
        """The same grid with a new description (its attributes changed)."""
        return dataclasses.replace(self, description=description, raw_metadata=raw_metadata)

    def cells_of(self, box: Box) -> Iterator[Piece]:
        """The read chunks `box` touches, with the part of it in each (grid.cells_of)."""
        if self.read_grid is None:
            return cells_of(box, self.read_chunk_shape)
        return self.read_grid.cells_of(box)

    def cells_touched(self, box: Box) -> Iterator[Index]:
        """The read chunks `box` touches (`cells_of` without the parts: a cheaper question)."""
        if self.read_grid is None:
            return cells_touched(box, self.read_chunk_shape)
        return (piece.cell for piece in self.read_grid.cells_of(box))

    # -- edge chunks ---------------------------------------------------------------------------

    def is_edge(self, unit: Index) -> bool:
        if self.read_grid is not None:
            return self.inside(unit) != self.read_chunk_shape
        return any((u + 1) * c > n for u, c, n in zip(unit, self.read_chunk_shape, self.shape, strict=True))

    def inside(self, unit: Index) -> Index:
        """How far a read chunk reaches into the array along each axis."""
        if self.read_grid is not None:
            return self.read_grid.inside(unit, self.shape)
        return extent_inside(unit, self.read_chunk_shape, self.shape)

    def within_array(self, unit: Index, in_cell: tuple[slice, ...]) -> tuple[slice, ...]:
        """The part of `in_cell` (a region of a read chunk) inside the array: what a write
        puts in an edge chunk's overhang (through its chunk file) is dropped, so it makes no
        element of the chunk known."""
        if not self.is_edge(unit):
            return in_cell
        return tuple(slice(min(s.start, n), min(s.stop, n))
                     for s, n in zip(in_cell, self.inside(unit), strict=True))

    def clear_overhang(self, unit: Index, data: np.ndarray, fill: Any) -> None:
        """Elements of an edge chunk outside the array hold the fill value."""
        if not self.is_edge(unit):
            return
        for d, (extent, c) in enumerate(zip(self.inside(unit), self.read_chunk_shape, strict=True)):
            if extent < c:
                data[(slice(None),) * d + (slice(extent, None),)] = fill
