"""What an array directory holds besides its metadata files: `data`, the files for legacy
tools (`header_registry`: `data.npy`, `data.nhdr`, `data.mhd`, `data.vrt`, `data.tif`) and
`chunks/`; their extended attributes; resizing through `data`. Pure: no FUSE, no store of
its own (the array has one)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..grid import Box, Index
from .chunks import ChunkNames
from .files import BytesFile, FileView, RegionArray, RegionFile
from .header_registry import ARRAY_FILE_VIEWS, HEADER_VIEWS, VIEW_KINDS
from .order import FortranOrder
from .placement import NOWHERE, Placement
from .xattrs import array_attributes

DATA_NAME, CHUNKS_NAME = "data", "chunks"


@dataclass(frozen=True)
class Layout:
    """How a mount lays out every array's files (mount options)."""

    byteorder: str = "little"
    fortran: bool = False
    views: frozenset[str] = VIEW_KINDS


class ArrayDirectory:
    def __init__(self, array: Any, layout: Layout, *, placement: Callable[[], Placement] | None = None,
                 on_resize: Callable[[tuple[int, ...]], None] | None = None) -> None:
        """`array` is a zarrfs.array.ZarrArray; `placement` says where its elements are, asked
        once, when a header is first made (it may read coordinate arrays); `on_resize` gets its
        new shape after a resize through `data` (the tree updates what it keeps of the metadata)."""
        self.array = array
        self.layout = layout
        self._find_placement = placement
        self._placement: Placement | None = None
        self._placement_lock = threading.Lock()
        self._on_resize = on_resize
        self.view: RegionArray = FortranOrder(array) if layout.fortran else array
        self.data = RegionFile(self.view, None, layout.byteorder, resizer=self._resize)
        self.names = ChunkNames(array.metadata.chunk_key_encoding, array.grid_shape)
        self._header_cache: dict[tuple[str, Index], bytes | None] = {}
        # kind -> (the array's state, the file, the digest of the listing it was made from)
        self._files: dict[str, tuple[Any, FileView, bytes | None]] = {}
        self._files_lock = threading.Lock()

    # -- names -------------------------------------------------------------------------------

    def entries(self) -> list[str]:
        found = [view.file_name for kind, view in HEADER_VIEWS.items() if self.header(kind) is not None]
        made = [view.file_name for kind, view in ARRAY_FILE_VIEWS.items() if self._shows(kind)]
        return [DATA_NAME, *found, *made, CHUNKS_NAME]

    def header_kind(self, name: str) -> str | None:
        for kind, view in HEADER_VIEWS.items():
            if view.file_name == name and self.header(kind) is not None:
                return kind
        for kind, made in ARRAY_FILE_VIEWS.items():
            if made.file_name == name and self._shows(kind):
                return kind
        return None

    def _shows(self, kind: str) -> bool:
        return kind in self.layout.views and ARRAY_FILE_VIEWS[kind].shows(self.array)

    # -- files -------------------------------------------------------------------------------

    def header(self, kind: str) -> bytes | None:
        """A header file's bytes for the array's shape now, or None when the format cannot
        describe this array (or the mount leaves it out)."""
        if kind not in self.layout.views:
            return None
        shape = tuple(self.array.shape)
        key = (kind, shape)
        if key not in self._header_cache:
            made = HEADER_VIEWS[kind].make(self.data.file_dtype, shape, self.layout.fortran,
                                           lambda: self.placement)
            self._header_cache = {key: made, **{k: v for k, v in self._header_cache.items() if k[1] == shape}}
        return self._header_cache[key]

    @property
    def placement(self) -> Placement:
        """Where the elements are (found once; header threads may ask at the same time)."""
        with self._placement_lock:
            if self._placement is None:
                self._placement = self._find_placement() if self._find_placement else NOWHERE
            return self._placement

    def header_file(self, kind: str) -> FileView:
        if kind in ARRAY_FILE_VIEWS:
            return self._array_file(kind)
        with_data = HEADER_VIEWS[kind].with_data
        if with_data is not None:
            return with_data(self.data, lambda: self.header(kind))
        contents = self.header(kind)
        assert contents is not None
        return BytesFile(contents)

    def _array_file(self, kind: str) -> FileView:
        """Made once for the array as it is now (finding its chunks in the store costs)."""
        state = (kind, tuple(self.array.shape), self.array.changes)
        with self._files_lock:
            found = self._files.get(kind)
            if found is not None and found[0] == state:
                return found[1]
        before = self.array.stored_listing.number
        made = ARRAY_FILE_VIEWS[kind].make(self.array, self.layout.byteorder, lambda: self.placement)
        after = self.array.stored_listing
        # Made from that listing if it took exactly one look at the stored objects (none
        # came between); else from none it can vouch for.
        listed = after.digest if after.number == before + 1 else None
        with self._files_lock:
            self._files[kind] = (state, made, listed)
        return made

    def forget_files(self) -> bool:
        """Another writer may have changed the store: the array's files made from stored
        objects (located chunks) are kept if a new listing finds every object as it was (its
        size and generation), the others are made again. Whether any was (or none was kept)."""
        with self._files_lock:
            listed = [found[2] for found in self._files.values()]
        now = self.array.list_stored().digest if any(listed) else None
        with self._files_lock:
            kept = {kind: found for kind, found in self._files.items() if now is not None and found[2] == now}
            changed = not kept or len(kept) < len(self._files)
            self._files = kept
        return changed

    def chunk_file(self, index: Index) -> RegionFile:
        box = self.array.metadata.chunk_box(index)
        if self.layout.fortran:
            box = Box(box.start[::-1], box.stop[::-1])
        return RegionFile(self.view, box, self.layout.byteorder, direct_io=True)

    def xattrs(self) -> dict[str, bytes]:
        sharding = self.array.sharding
        return array_attributes(self.array.metadata, self.data.file_dtype,
                                sharding.inner_shape if sharding else None)

    # -- resizing ----------------------------------------------------------------------------

    def _resize(self, shape: tuple[int, ...]) -> None:
        """`shape` in the order of `data` (reversed when it is in Fortran order)."""
        real = shape[::-1] if self.layout.fortran else shape
        self.array.resize(real)
        self.reshaped()
        if self._on_resize is not None:
            self._on_resize(real)

    def reshaped(self) -> None:
        """The array has a new shape (resized here or by another writer): new chunk names."""
        self.names = ChunkNames(self.array.metadata.chunk_key_encoding, self.array.grid_shape)
