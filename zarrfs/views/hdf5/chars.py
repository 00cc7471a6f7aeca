"""numpy's fixed-size bytes (`S`: v2 `|S8`, v3 `null_terminated_bytes`) as a dataset of
`data.h5`: netCDF's characters (NC_CHAR, HDF5's one-byte string) with one more dimension, the
bytes of an element, named `stringN` as xarray names it; xarray reads such a variable back as
the same `S` bytes. (An HDF5 fixed-length string of N bytes would be one element each, but
Debian's `ncdump` crashes on it, and netCDF4-python reads it as str.)

An element's N bytes are its N characters, so a chunk of the array is a chunk of the dataset
as stored: chunks pass through where `filters` maps the codecs (for one-byte elements).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...codecs import BytesLike
from ...formats.description import ArrayDescription
from ...grid import Box, Index, cell_count
from ..files import FileForm
from ..plugins import PLUGIN_FILTERS
from .array_file import MAX_CHUNKS, H5Dataset, dataset_file
from .dataset_chunks import ChunkedFile
from .filters import OTHERS, filtered

CHAR = np.dtype("S1")
_SIZED = frozenset(ident for ident, _, _ in OTHERS.values())


def shows_chars_h5(array: Any) -> bool:
    """An array of numpy `S` bytes (not raw `V` bytes) of rank 1 or more and at most
    MAX_CHUNKS chunks of a regular grid."""
    if array.data_type.storage.kind != "S" or not array.shape or 0 in array.shape:
        return False
    return bool(array.regular_read_chunks and cell_count(array.shape, array.read_chunk_shape) <= MAX_CHUNKS)


class CharArray:
    """An array of `S` elements of N bytes seen as an array of characters of one more
    dimension, of length N (what `hdf5_view.H5Array` asks)."""

    def __init__(self, array: Any) -> None:
        self.array = array
        self.length = int(array.data_type.itemsize)
        self.shape: Index = (*array.shape, self.length)
        self.read_chunk_shape: Index = (*array.read_chunk_shape, self.length)
        self.metadata = _described(array.metadata, self.length)
        self.data_type = array.data_type
        self.pipeline, self.sharding = array.pipeline, array.sharding

    @property
    def changes(self) -> Any:
        return self.array.changes

    @property
    def dirty_bytes(self) -> int:
        return int(self.array.dirty_bytes)

    def flush(self) -> None:
        self.array.flush()

    def stored_rows(self) -> Any:
        return self.array.stored_rows()

    def stored_sizes_numbered(self, numbers: np.ndarray, rows: Any = None) -> dict[int, int]:
        """(A chunk's number is its array's: the characters are one chunk along their axis.)"""
        return dict(self.array.stored_sizes_numbered(numbers, rows))

    def read_stored_unit(self, unit: Index) -> BytesLike | None:
        found: BytesLike | None = self.array.read_stored_unit(unit[:-1])
        return found

    def encoded_fill(self) -> BytesLike:
        """A chunk not stored, encoded: its bytes are the characters' (zeros, when passed through)."""
        found: BytesLike = self.array.encoded_fill()
        return found

    def read_boxes(self, boxes: Sequence[Box]) -> list[np.ndarray]:
        return [self._as_chars(v) for v in self.array.read_boxes([Box(box.start[:-1], box.stop[:-1])
                                                                  for box in boxes])]

    def read_unit(self, unit: Index) -> np.ndarray:
        return self._as_chars(self.array.read_unit(unit[:-1]))

    def _as_chars(self, values: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(values).view(CHAR).reshape(*values.shape, self.length)


def _described(metadata: ArrayDescription, length: int) -> ArrayDescription:
    """The array's description with the characters' dimension named (when the others are);
    a fill value stated (which xarray masks) only when it is empty, a character of zero (no
    character holds an element's other fill values)."""
    attributes = {k: v for k, v in metadata.attributes.items() if k != "_FillValue"}
    names = metadata.dimension_names or attributes.get("_ARRAY_DIMENSIONS")
    named = (*names, f"string{length}") if isinstance(names, list | tuple) else None
    stated = metadata.fill_value_stated and not any(bytes(metadata.fill_value))
    return dataclasses.replace(metadata, attributes=attributes, dimension_names=named,
                               fill_value_stated=stated)


def char_dataset(array: CharArray, plugins: bool) -> H5Dataset:
    """The characters as a dataset: chunks as stored where HDF5's filters decode them (those
    of plugins too: `plugins`) and a chunk not stored reads as zeros (the fill value of zero
    bytes); else decoded here."""
    inner = array.sharding.inner if array.sharding else array.pipeline
    through = filtered(inner, 1, plugins=plugins) if array.array.metadata.is_regular else None
    fill = bytes(array.array.metadata.fill_value)
    # (blosc's and bzip2's filter values and bounds count an element as one byte here: decoded)
    if through and (any(fill) or any(ident in _SIZED for ident, _ in through.filters)):
        through = None
    if through and array.dirty_bytes:
        array.flush()
    seen: Any = array  # (what the dataset asks of an array; not a TIFF's)
    return H5Dataset(seen, CHAR, through, b"\0")


def chars_h5_file(array: Any, form: FileForm) -> ChunkedFile:
    """`data.h5` of an array of `S` bytes (one `shows_chars_h5` shows)."""
    return dataset_file(char_dataset(CharArray(array), form.options[PLUGIN_FILTERS]))
