"""Views in Fortran order (`-o order=F`): the flat F-order bytes of an array are the flat
C-order bytes of the same array with its axes reversed, so an F-order file is a C-order
`RegionFile` over this adapter (element [i, j] at i + j * shape[0])."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..formats import DataType
from ..grid import Box, Index
from .files import RegionArray


def _reversed(box: Box) -> Box:
    return Box(box.start[::-1], box.stop[::-1])


class FortranOrder:
    """An array seen with its axes reversed (a RegionArray itself)."""

    def __init__(self, array: RegionArray) -> None:
        self.array = array
        self.data_type: DataType = array.data_type

    @property
    def shape(self) -> Index:
        return self.array.shape[::-1]

    @property
    def chunk_shape(self) -> Index:
        return self.array.chunk_shape[::-1]

    @property
    def read_chunk_shape(self) -> Index:
        return self.array.read_chunk_shape[::-1]

    @property
    def read_only(self) -> bool:
        return self.array.read_only

    def read_boxes(self, boxes: Sequence[Box]) -> list[np.ndarray]:
        return [values.transpose() for values in self.array.read_boxes([_reversed(b) for b in boxes])]

    def cached(self, boxes: Sequence[Box]) -> bool:
        return self.array.cached([_reversed(b) for b in boxes])

    def write(self, box: Box, values: np.ndarray) -> None:
        self.array.write(_reversed(box), values.transpose())

    def resize(self, shape: tuple[int, ...]) -> None:
        self.array.resize(shape[::-1])

    def prefetch(self, box: Box) -> None:
        self.array.prefetch(_reversed(box))

    def stream(self, box: Box, dtype: np.dtype[Any] | None = None) -> None:
        """No slabs: the array's buffers are in the other order (reads go through the cache)."""
        return None

    @property
    def slab_bytes(self) -> int:
        return 0

    def flush(self) -> None:
        self.array.flush()

    def chunk_key(self, chunk: Sequence[int]) -> str:
        return self.array.chunk_key(list(chunk)[::-1])
