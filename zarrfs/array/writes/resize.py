"""Changing an array's shape (TensorStore's resize semantics).

Growing only rewrites the metadata: the new elements read as the fill value, because every
chunk zarrfs writes holds the fill value outside the array. Shrinking first resets the part
of the new edge chunks that falls outside the new shape to the fill value and deletes the
chunks (and shards) wholly outside it, then rewrites the metadata, so growing again never
shows old data, and a crash in between leaves the old shape with the cut region cleared.

The metadata document is not this layer's: a `MetadataWriter` given by whoever opened the
array stores the new shape (zarrfs.array_metadata); an array opened without one cannot be
resized.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Protocol

import numpy as np

from ...errors import ReadOnlyError, ResizeError
from ...formats.description import MAX_ARRAY_BYTES
from ...grid import Box, Index
from ...store import Store
from ..cache import ArrayCache
from ..geometry import Geometry
from .writeback import WriteBack


class MetadataWriter(Protocol):
    def __call__(self, current: bytes, shape: Index) -> bytes:
        """Store the array's metadata document (`current`: as last seen, b"" when not read
        yet) with a new shape; the document stored."""


class Resizer:
    """One resize (or adoption of another writer's) at a time; the geometry is swapped in
    with `take` once the store holds the new shape."""

    def __init__(self, array_cache: ArrayCache, writeback: WriteBack, store: Store,
                 geometry: Callable[[], Geometry],
                 take: Callable[[Geometry], None], write: Callable[[Box, np.ndarray], None],
                 metadata_writer: MetadataWriter | None, forget_stored: Callable[[], None]) -> None:
        """`forget_stored`: forget what the chunk I/O knows of stored objects (shard indexes,
        shards held), which a change of shape may have deleted or rewritten."""
        self.array_cache = array_cache
        self.writeback = writeback
        self.store = store
        self.geometry = geometry
        self.take = take
        self.write = write
        self.metadata_writer = metadata_writer
        self.forget_stored = forget_stored
        self._lock = threading.Lock()

    def resize(self, shape: Index) -> None:
        with self._lock:
            old = self.geometry()
            write_metadata = self._check(old, shape)
            if shape == old.shape:
                return
            self.writeback.flush()
            if any(n < o for n, o in zip(shape, old.shape, strict=True)):
                self._clear_cut_region(old, shape)
                self.writeback.flush()
                self._delete_outside(old, shape)
            # Cached chunks past the new edge may be gone from the store: read them afresh.
            self._forget_cached()
            self._take_shape(shape, write_metadata(old.raw_metadata, shape))

    def adopt(self, shape: Index, raw: bytes) -> None:
        """Take the shape another writer gave the array. Writes made under the old shape are
        stored first; cached edge chunks are read again (their overhang changed)."""
        with self._lock:
            self.writeback.flush()
            self._forget_cached()
            self._take_shape(shape, raw)

    def _forget_cached(self) -> None:
        self.array_cache.drop_all()
        self.forget_stored()

    def _take_shape(self, shape: Index, raw: bytes) -> None:
        self.take(self.geometry().resized(shape, raw))
        self.array_cache.changed()

    def _check(self, old: Geometry, shape: Index) -> MetadataWriter:
        """What will store the new shape, once `shape` is one the array can take."""
        if self.store.read_only:
            raise ReadOnlyError("the array is read-only")
        if self.metadata_writer is None:
            raise ReadOnlyError("the array was opened without a writer of its metadata: it cannot be resized")
        if not old.shape:
            raise ResizeError("an array of rank 0 cannot be resized")
        if len(shape) != len(old.shape) or any(n < 0 for n in shape):
            raise ResizeError(f"shape {list(shape)} does not fit an array of rank {len(old.shape)}")
        if math.prod(shape) * old.description.data_type.itemsize > MAX_ARRAY_BYTES:
            raise ResizeError(f"shape {list(shape)} is too large to address")
        grown = old.description.resized(shape)
        sharded = old.read_grid is None  # (a rectilinear grid's read chunks: inner chunks)
        if grown.rectilinear and sharded and grown.rectilinear.divisible_by(old.read_chunk_shape) is not None:
            raise ResizeError(f"growing to {list(shape)} would add a shard edge its inner chunks "
                              f"({list(old.read_chunk_shape)}) do not divide")
        if grown.chunk_shape != old.chunk_shape:
            # (the cache holds every chunk in a buffer of the largest edges, fixed at open)
            raise ResizeError(f"growing to {list(shape)} would add a chunk edge larger than any the "
                              f"rectilinear grid has ({list(old.chunk_shape)}): grow in smaller steps")
        return self.metadata_writer

    def _clear_cut_region(self, old: Geometry, shape: Index) -> None:
        """Set to the fill value what lies between the new and the old shape inside the
        chunks that stay (the new edge chunks), one chunk-sized piece at a time."""
        covered = old.description.resized(shape).covered()
        kept_end = [min(o, c) for o, c in zip(old.shape, covered, strict=True)]
        fill = self.array_cache.fill_element
        for d, (new, end) in enumerate(zip(shape, kept_end, strict=True)):
            if new >= end:
                continue
            start = tuple(new if e == d else 0 for e in range(len(shape)))
            stop = tuple(end if e == d else kept_end[e] for e in range(len(shape)))
            for piece in old.cells_of(Box(start, stop)):
                region = Box(tuple(s.start + b for s, b in zip(piece.in_box, start, strict=True)),
                             tuple(s.stop + b for s, b in zip(piece.in_box, start, strict=True)))
                values = np.empty(region.shape, dtype=self.array_cache.fill_chunk.dtype)
                values[...] = fill
                self.write(region, values)

    def _delete_outside(self, old: Geometry, shape: Index) -> None:
        grid = old.description.resized(shape).grid_shape
        encoding = old.description.chunk_key_encoding
        for key in list(self.store.list()):
            index = encoding.parse(key, len(shape))
            if index is not None and any(i >= g for i, g in zip(index, grid, strict=True)):
                self.store.delete(key)
        self.store.sync_directories([""])
