"""Changing an array's shape (TensorStore's resize semantics).

Growing only rewrites the metadata: the new elements read as the fill value, because every
chunk zarrfs writes holds the fill value outside the array. Shrinking first resets the part
of the new edge chunks that falls outside the new shape to the fill value and deletes the
chunks (and shards) wholly outside it, then rewrites the metadata, so growing again never
shows old data, and a crash in between leaves the old shape with the cut region cleared.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ReadOnlyError, ResizeError
from ..formats.description import MAX_ARRAY_BYTES
from ..formats.edit import METADATA_KEYS, resized_document
from ..grid import Box, cells_of

if TYPE_CHECKING:
    from .core import ZarrArray


def resize(array: ZarrArray, shape: tuple[int, ...]) -> None:
    old = array.shape
    _check(array, shape)
    if shape == old:
        return
    array.flush()
    if any(n < o for n, o in zip(shape, old, strict=True)):
        _clear_cut_region(array, shape)
        array.flush()
        _delete_outside(array, shape)
    # Cached chunks past the new edge may be gone from the store: read them afresh.
    array.cache.drop_owner(array.owner)
    key = METADATA_KEYS[array.metadata.zarr_format]
    stored = array.raw_metadata or array.store.get(key) or b""  # (opened from consolidated metadata)
    raw = resized_document(stored, array.metadata.zarr_format, shape)
    array.store.put(key, raw)
    _take_shape(array, shape, raw)


def adopt(array: ZarrArray, shape: tuple[int, ...], raw: bytes) -> None:
    """Take the shape another writer gave the array. Writes made under the old shape are
    stored first; cached edge chunks are read again (their overhang changed)."""
    array.flush()
    array.cache.drop_owner(array.owner)
    _take_shape(array, shape, raw)


def _take_shape(array: ZarrArray, shape: tuple[int, ...], raw: bytes) -> None:
    array.raw_metadata = raw
    array.metadata = dataclasses.replace(array.metadata, shape=shape)
    array.shape = shape
    array.grid_shape = array.metadata.grid_shape
    with array._lock:
        array.mutations += 1


def _check(array: ZarrArray, shape: tuple[int, ...]) -> None:
    if array.read_only:
        raise ReadOnlyError("the array is read-only")
    if not array.shape:
        raise ResizeError("an array of rank 0 cannot be resized")
    if len(shape) != len(array.shape) or any(n < 0 for n in shape):
        raise ResizeError(f"shape {list(shape)} does not fit an array of rank {len(array.shape)}")
    if math.prod(shape) * array.data_type.itemsize > MAX_ARRAY_BYTES:
        raise ResizeError(f"shape {list(shape)} is too large to address")


def _clear_cut_region(array: ZarrArray, shape: tuple[int, ...]) -> None:
    """Set to the fill value what lies between the new and the old shape inside the chunks
    that stay (the new edge chunks), one chunk-sized piece at a time."""
    old, chunks = array.shape, array.chunk_shape
    kept_end = [min(o, -(-n // c) * c) for n, o, c in zip(shape, old, chunks, strict=True)]
    fill = np.frombuffer(array.metadata.fill_value, dtype=array.data_type.storage)[0]
    for d, (new, end) in enumerate(zip(shape, kept_end, strict=True)):
        if new >= end:
            continue
        start = tuple(new if e == d else 0 for e in range(len(shape)))
        stop = tuple(end if e == d else kept_end[e] for e in range(len(shape)))
        for piece in cells_of(Box(start, stop), array.read_chunk_shape):
            region = Box(tuple(s.start + b for s, b in zip(piece.in_box, start, strict=True)),
                         tuple(s.stop + b for s, b in zip(piece.in_box, start, strict=True)))
            values = np.empty(region.shape, dtype=array.data_type.storage)
            values[...] = fill
            array.write(region, values)


def _delete_outside(array: ZarrArray, shape: tuple[int, ...]) -> None:
    grid = [-(-n // c) for n, c in zip(shape, array.chunk_shape, strict=True)]
    encoding = array.metadata.chunk_key_encoding
    for key in list(array.store.list()):
        index = encoding.parse(key, len(shape))
        if index is not None and any(i >= g for i, g in zip(index, grid, strict=True)):
            array.store.delete(key)
    array.store.sync_directories([""])
