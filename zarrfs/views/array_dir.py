"""What an array directory holds besides its metadata files: `data`, the files for legacy
tools (`registry`: `data.npy`, `data.raw.nhdr`, `data.mhd`, `data.vrt`, `data.nii`,
`data.mrc`, `data.tif`, `data.h5`) and `chunks/`; their extended attributes; resizing through
`data`. Pure: no FUSE, no store of its own (the array has one)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..declared import Option, OptionValues, choice
from ..grid import Box, Index
from .chunks import ChunkNames
from .files import BytesFile, CannotHold, FileForm, FileView, MadeView, RegionArray
from .order import FortranOrder
from .placement import NOWHERE, Placement
from .region_file import RegionFile
from .registry import ARRAY_FILE_VIEWS, FAMILY_OPTIONS, HEADER_VIEWS, VIEWS
from .xattrs import array_attributes

log = logging.getLogger(__name__)
DATA_NAME, CHUNKS_NAME = "data", "chunks"


ENDIAN = choice("endian", {"little": "little", "big": "big"}, "little",
                "byte order of `data` and the chunk files (default `little`)")
ORDER = choice("order", {"C": False, "F": True}, "C", "element order of `data`, the views and the chunk "
               "files (default `C`; `F` for MATLAB, IDL, Fortran)")
# The mount options of the views: the array directory's, and those each family declares.
OPTIONS: tuple[Option[Any], ...] = (VIEWS, ENDIAN, ORDER, *FAMILY_OPTIONS)


@dataclass(frozen=True)
class ViewSettings:
    """How a mount lays out every array's files, as its options say: the array directory
    reads its own (`views=`, `endian=`, `order=`), each view family its own (`form`)."""

    options: OptionValues = field(default_factory=OptionValues)

    @property
    def byteorder(self) -> str:
        return self.options[ENDIAN]

    @property
    def fortran(self) -> bool:
        return self.options[ORDER]

    @property
    def views(self) -> frozenset[str]:
        return self.options[VIEWS]

    @property
    def form(self) -> FileForm:
        return FileForm(self.byteorder, self.options)


@dataclass(frozen=True)
class MadeFile:
    """A file made of the array (`ARRAY_FILE_VIEWS`), and what the array was then: (kind,
    shape, changes)."""

    state: Any
    file: MadeView


class ArrayDirectory:
    def __init__(self, array: Any, view_settings: ViewSettings, *,
                 placement: Callable[[], Placement] | None = None,
                 on_resize: Callable[[tuple[int, ...]], None] | None = None, path: str = "") -> None:
        """`array` is a zarrfs.array.ZarrArray; `placement` says where its elements are, asked
        once, when a header is first made (it may read coordinate arrays); `on_resize` gets its
        new shape after a resize through `data` (the tree updates what it keeps of the metadata);
        `path`, the array's in the mount, names it in the log."""
        self.array = array
        self.path = path
        self.view_settings = view_settings
        self._find_placement = placement
        self._placement: Placement | None = None
        self._placement_lock = threading.Lock()
        self._on_resize = on_resize
        self.region: RegionArray = FortranOrder(array) if view_settings.fortran else array
        self.data = RegionFile(self.region, None, view_settings.byteorder, resizer=self._resize,
                               remote=array.fetches_remotely)
        self.names = ChunkNames(array.metadata.chunk_key_encoding, array.grid_shape)
        self._header_cache: dict[tuple[str, Index], bytes | None] = {}
        self._files: dict[str, MadeFile] = {}
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
        return kind in self.view_settings.views and ARRAY_FILE_VIEWS[kind].shows(self.array)

    # -- files -------------------------------------------------------------------------------

    def header(self, kind: str) -> bytes | None:
        """A header file's bytes for the array's shape now, or None when the format cannot
        describe this array (or the mount leaves it out)."""
        if kind not in self.view_settings.views:
            return None
        shape = tuple(self.array.shape)
        key = (kind, shape)
        if key not in self._header_cache:
            made = self._made_header(kind, shape)
            self._header_cache = {key: made, **{k: v for k, v in self._header_cache.items() if k[1] == shape}}
        return self._header_cache[key]

    def _made_header(self, kind: str, shape: Index) -> bytes | None:
        view = HEADER_VIEWS[kind]
        try:
            return view.make(self.data.file_dtype, shape, self.view_settings.fortran, lambda: self.placement)
        except CannotHold as e:
            log.info("array %s has no %s: %s", self.path or "/", view.file_name, e)
            return None

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
        """Made for the array as it is now (from its shape and codecs: no store request), and
        kept until its shape or its elements change (here, or found changed by a recheck)."""
        with self._files_lock:
            state = (kind, tuple(self.array.shape), self.array.changes)
            found = self._files.get(kind)
        if found is not None and found.state == state:
            return found.file
        made = ARRAY_FILE_VIEWS[kind].make(self.array, self.view_settings.form, lambda: self.placement)
        with self._files_lock:
            self._files[kind] = MadeFile(state, made)
        return made

    def refetch_files(self) -> None:
        """Another writer may have changed the store: what the array's files fetched as they
        were read (stored tiles) is fetched again. (Their layout follows the array's shape
        and codecs alone, and what they decode comes through the array's rechecked cache.)"""
        with self._files_lock:
            made = [found.file for found in self._files.values()]
        for file in made:
            file.forget_fetched()

    def chunk_file(self, index: Index) -> RegionFile:
        box = self.array.metadata.chunk_box(index)
        if self.view_settings.fortran:
            box = Box(box.start[::-1], box.stop[::-1])
        return RegionFile(self.region, box, self.view_settings.byteorder, direct_io=True)

    def xattrs(self) -> dict[str, bytes]:
        sharding = self.array.sharding
        return array_attributes(self.array.metadata, self.data.file_dtype,
                                sharding.inner_shape if sharding else None)

    # -- resizing ----------------------------------------------------------------------------

    def _resize(self, shape: tuple[int, ...]) -> None:
        """`shape` in the order of `data` (reversed when it is in Fortran order)."""
        real = shape[::-1] if self.view_settings.fortran else shape
        self.array.resize(real)
        self.reshaped()
        if self._on_resize is not None:
            self._on_resize(real)

    def reshaped(self) -> None:
        """The array has a new shape (resized here or by another writer): new chunk names."""
        self.names = ChunkNames(self.array.metadata.chunk_key_encoding, self.array.grid_shape)
