"""An array of a group's `data.h5` that is not opened yet, as the file's layout sees it: from
its description alone (its type, shape, codecs and read chunks), so a stat of the group's file
opens no array; its chunks are read from the array, opened when the first is read."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...array import ReadChunks
from ...codecs import BytesLike
from ...formats.description import ArrayDescription
from ...grid import Box, Index


class DescribedArray:
    """What `array_file` asks of an array (`shows_array_h5`, `h5_dataset`, `DatasetChunks`),
    from `description`; `opened()` gives the array itself for its chunks."""

    dirty_bytes = 0  # (an array written through the mount is opened: the tree gives it instead)
    changes = 0

    def __init__(self, description: ArrayDescription, opened: Callable[[], Any]) -> None:
        read = ReadChunks.of(description)
        self.metadata = description
        self.shape = description.shape
        self.data_type = description.data_type
        self.pipeline, self.sharding, self.read_chunk_shape = read.pipeline, read.sharding, read.shape
        self.regular_read_chunks = read.grid is None
        self._opened = opened
        self._array: Any = None
        self._lock = threading.Lock()

    @property
    def fill_chunk(self) -> np.ndarray:
        """The fill value (one element: all the layout asks)."""
        return np.frombuffer(self.metadata.fill_value, self.data_type.storage)[:1]

    def _open(self) -> Any:
        with self._lock:
            if self._array is None:
                self._array = self._opened()
            return self._array

    def stored_rows(self) -> Any:
        return self._open().stored_rows()

    def stored_sizes_numbered(self, numbers: np.ndarray, rows: Any = None) -> dict[int, int]:
        return dict(self._open().stored_sizes_numbered(numbers, rows))

    def read_stored_unit(self, unit: Index) -> BytesLike | None:
        found: BytesLike | None = self._open().read_stored_unit(unit)
        return found

    def encoded_fill(self) -> BytesLike:
        found: BytesLike = self._open().encoded_fill()
        return found

    def read_boxes(self, boxes: Sequence[Box]) -> list[np.ndarray]:
        return list(self._open().read_boxes(boxes))

    def read_unit(self, unit: Index) -> np.ndarray:
        found: np.ndarray = self._open().read_unit(unit)
        return found
