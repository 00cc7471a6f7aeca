"""Rectilinear chunk grids (the zarr-extensions registry's `rectilinear`, kind `inline`): the
chunk edges along each axis are listed, or one integer repeats (a regular axis). Pure index
math beside `grid` (regular grids), with the same `Box` and `Piece`.

As zarr-python 3.2 reads them: the grid holds the chunks that overlap the array (edges past
its end are kept in the document but name no chunk), and a resize that grows an axis past the
sum of its edges appends one edge covering the growth; shrinking keeps the edges.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import Any

from .errors import MetadataError
from .grid import Box, Index, Piece

Axis = int | tuple[int, ...]  # a repeated step, or the explicit edges of one axis


@dataclass(frozen=True)
class RectilinearGrid:
    axes: tuple[Axis, ...]
    _ends: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ends = tuple(() if isinstance(a, int) else tuple(itertools.accumulate(a)) for a in self.axes)
        object.__setattr__(self, "_ends", ends)

    # -- one axis ------------------------------------------------------------------------------

    def start(self, axis: int, i: int) -> int:
        """Where chunk `i` along `axis` begins."""
        step = self.axes[axis]
        if isinstance(step, int):
            return i * step
        return self._ends[axis][i - 1] if i else 0

    def edge(self, axis: int, i: int) -> int:
        step = self.axes[axis]
        return step if isinstance(step, int) else step[i]

    def index_of(self, axis: int, position: int) -> int:
        """The chunk along `axis` that holds `position` (past the edges: one past the last)."""
        step = self.axes[axis]
        if isinstance(step, int):
            return position // step
        return bisect.bisect_right(self._ends[axis], position)

    def count(self, axis: int, extent: int) -> int:
        """How many chunks along `axis` overlap [0, extent)."""
        if extent <= 0:
            return 0
        return self.index_of(axis, extent - 1) + 1

    # -- the grid ------------------------------------------------------------------------------

    @property
    def largest(self) -> Index:
        """The largest edge along each axis: the shape every chunk fits in."""
        return tuple(a if isinstance(a, int) else max(a) for a in self.axes)

    def grid_shape(self, shape: Sequence[int]) -> Index:
        return tuple(self.count(d, n) for d, n in enumerate(shape))

    def chunk_box(self, index: Sequence[int]) -> Box:
        start = tuple(self.start(d, i) for d, i in enumerate(index))
        return Box(start, tuple(s + e for s, e in zip(start, self.chunk_shape(index), strict=True)))

    def chunk_shape(self, index: Sequence[int]) -> Index:
        return tuple(self.edge(d, i) for d, i in enumerate(index))

    def covered(self, shape: Sequence[int]) -> Index:
        """Where the chunks overlapping an array of `shape` end, along each axis."""
        return tuple(self.start(d, self.count(d, n)) for d, n in enumerate(shape))

    def inside(self, index: Sequence[int], shape: Sequence[int]) -> Index:
        """How far chunk `index` reaches into an array of `shape` along each axis."""
        return tuple(max(0, min(self.edge(d, i), n - self.start(d, i)))
                     for d, (i, n) in enumerate(zip(index, shape, strict=True)))

    def cells_of(self, box: Box) -> Iterator[Piece]:
        """Every chunk a box touches, in C order, with the part of the box inside it."""
        ranges = [range(self.index_of(d, a), self.index_of(d, b - 1) + 1) if b > a else range(0)
                  for d, (a, b) in enumerate(zip(box.start, box.stop, strict=True))]
        for cell in product(*ranges):
            in_cell, in_box = [], []
            for d, (i, a, b) in enumerate(zip(cell, box.start, box.stop, strict=True)):
                first = self.start(d, i)
                lo, hi = max(a, first), min(b, first + self.edge(d, i))
                in_cell.append(slice(lo - first, hi - first))
                in_box.append(slice(lo - a, hi - a))
            yield Piece(cell, tuple(in_cell), tuple(in_box))

    def divisible_by(self, shape: Sequence[int]) -> int | None:
        """The first axis with an edge that `shape` does not divide (None: every edge is)."""
        for d, (axis, c) in enumerate(zip(self.axes, shape, strict=True)):
            if any(e % c for e in ({axis} if isinstance(axis, int) else set(axis))):
                return d
        return None

    def resized(self, shape: Sequence[int]) -> RectilinearGrid:
        """The grid after a resize to `shape` (zarr-python's rule: an axis grown past its
        edges gets one more edge, the size of the growth; nothing else changes)."""
        axes = []
        for axis, extent in zip(self.axes, shape, strict=True):
            total = 0 if isinstance(axis, int) else sum(axis)
            axes.append(axis if isinstance(axis, int) or extent <= total else (*axis, extent - total))
        return RectilinearGrid(tuple(axes))

    def edges_text(self) -> str:
        """The edges as `zarrfs info` shows them: per axis, runs as `edge*count`."""
        return " x ".join(str(a) if isinstance(a, int) else f"[{', '.join(_runs(a))}]" for a in self.axes)

    def to_json(self) -> dict[str, Any]:
        shapes = [a if isinstance(a, int) else _run_length_json(a) for a in self.axes]
        return {"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": shapes}}


def _runs(edges: Sequence[int]) -> list[str]:
    return [f"{e}*{n}" if n > 1 else str(e) for e, n in _grouped(edges)]


def _grouped(edges: Sequence[int]) -> list[tuple[int, int]]:
    return [(e, len(list(run))) for e, run in itertools.groupby(edges)]


def _run_length_json(edges: Sequence[int]) -> list[Any]:
    return [[e, n] if n > 1 else e for e, n in _grouped(edges)]


# -- parsing ---------------------------------------------------------------------------------------


def parse_rectilinear(config: object, shape: Sequence[int], member: str) -> RectilinearGrid:
    """The grid a `rectilinear` chunk grid's configuration declares for an array of `shape`."""
    if not isinstance(config, Mapping):
        raise MetadataError(f"{member}.configuration", f"expected an object, got {config!r}")
    if config.get("kind") != "inline":
        raise MetadataError(f"{member}.configuration.kind",
                            f"only 'inline' is supported, got {config.get('kind')!r}")
    shapes = config.get("chunk_shapes")
    where = f"{member}.configuration.chunk_shapes"
    if not isinstance(shapes, list) or len(shapes) != len(shape):
        raise MetadataError(where, f"expected a list of {len(shape)} axes, got {shapes!r}")
    axes = tuple(_parse_axis(value, extent, f"{where}[{d}]")
                 for d, (value, extent) in enumerate(zip(shapes, shape, strict=True)))
    return RectilinearGrid(axes)


def _parse_axis(value: object, extent: int, member: str) -> Axis:
    if _positive(value):
        assert isinstance(value, int)
        return value
    if not isinstance(value, list) or not value:
        raise MetadataError(member, f"expected a positive integer or a list of edges, got {value!r}")
    edges: list[int] = []
    for i, item in enumerate(value):
        if _positive(item):
            edges.append(item)
        elif isinstance(item, list) and len(item) == 2 and all(_positive(v) for v in item):
            if item[1] > (1 << 24):
                raise MetadataError(f"{member}[{i}]", f"a run of {item[1]} edges is too long")
            edges += [item[0]] * item[1]
        else:
            raise MetadataError(f"{member}[{i}]",
                                f"expected an edge or [edge, count] of positive integers, got {item!r}")
    if sum(edges) < extent:
        raise MetadataError(member, f"the edges sum to {sum(edges)}, less than the array's {extent}")
    return tuple(edges)


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
