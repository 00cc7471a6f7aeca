"""What each node of the tree shows the fuse layer, by the role of its reference: a
directory's entries and the lookup of a name in it, a file, its extended attributes, and the
other inodes showing the same bytes. `Tree` keeps the nodes, opens the arrays and takes the
changes; this reads them (`NodeFiles`, a base of `Tree`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..formats import NodeMetadata
from ..views import FileView, group_attributes, views_attribute
from ..views.array_dir import CHUNKS_NAME, DATA_NAME, ArrayDirectory
from ..views.registry import SHARING_DATA
from .group_views import GroupViews
from .inodes import ARRAY, CHUNK, CHUNKS, DATA, GROUP, HEADER, METADATA, UPLOAD, InodeTable, Ref
from .metadata_files import MetadataFiles
from .string_arrays import StringFiles
from .uploads import Uploads


@dataclass
class OpenedArray:
    """An array as the tree opened it: its directory, or why it has none."""

    directory: ArrayDirectory | None
    problem: str | None
    strings: StringFiles | None = None  # (an array of strings or bytes: no directory, its own files)


class TreeForFiles(Protocol):
    """What the files read of the tree (`Tree`)."""

    inodes: InodeTable
    metadata: MetadataFiles
    uploads: Uploads
    group_views: GroupViews

    def _node(self, path: str) -> NodeMetadata: ...
    def _group_child(self, path: str, name: str) -> NodeMetadata | None: ...
    def group_children(self, path: str) -> dict[str, NodeMetadata]: ...
    def open_array(self, path: str) -> OpenedArray: ...


class NodeFiles:
    """The reading side of `Tree`, its methods taking the tree as `TreeForFiles`."""

    # -- names -------------------------------------------------------------------------------

    def names(self: TreeForFiles, directory: Ref) -> Sequence[str]:
        """A directory's entries in a stable order (lazily generated for chunk grids)."""
        if directory.role == CHUNKS:
            opened = self.open_array(directory.path).directory
            return opened.names.names(directory.parts) if opened else []
        files = self.metadata.stored(directory.path, self._node(directory.path).files)
        if directory.role == GROUP:
            return [*files, *self.group_views.names_in(directory.path), *self.group_children(directory.path),
                    *self.uploads.names(directory.path)]
        found = self.open_array(directory.path)
        opened = found.directory
        strings = found.strings.files if found.strings else ()
        return [*files, *(opened.entries() if opened else ()), *strings]

    def lookup(self: TreeForFiles, directory: Ref, name: str) -> Ref | None:
        if directory.role == CHUNKS:
            return _chunk_ref(self.open_array(directory.path).directory, directory, name)
        if name in self._node(directory.path).files:
            stored = self.metadata.size(directory.path, name) is not None
            return Ref(directory.path, METADATA, (name,)) if stored else None
        if directory.role == GROUP and self.uploads.find(directory.path, name) is not None:
            return Ref(directory.path, UPLOAD, (name,))
        if directory.role == GROUP:
            view = self.group_views.lookup(directory.path, name)
            child = None if view else self._group_child(directory.path, name)
            if child is None:
                return view
            return Ref(child.path, GROUP if child.kind == "group" else ARRAY)
        strings = self.open_array(directory.path).strings if directory.role == ARRAY else None
        if strings is not None and name in strings.files:
            return Ref(directory.path, HEADER, (name,))
        opened = self.open_array(directory.path).directory if directory.role == ARRAY else None
        if opened is None:
            return None
        if name in (DATA_NAME, CHUNKS_NAME):
            return Ref(directory.path, DATA if name == DATA_NAME else CHUNKS)
        return Ref(directory.path, HEADER, (name,)) if opened.header_kind(name) else None

    # -- files and attributes ----------------------------------------------------------------

    def file(self: TreeForFiles, ref: Ref) -> FileView:
        if ref.role == METADATA:
            return self.metadata.file(ref.path, ref.parts[0])
        if ref.role == UPLOAD:
            upload = self.uploads.find(ref.path, ref.parts[0])
            if upload is None:
                raise FileNotFoundError(ref.describe())  # (written and closed: the array remains)
            return upload
        if self.group_views.serves(ref):
            return self.group_views.file(ref.path, ref.parts[0])
        opened_array = self.open_array(ref.path)
        strings = opened_array.strings
        if strings is not None and ref.parts and ref.parts[0] in strings.files:
            return strings.files[ref.parts[0]]
        opened = opened_array.directory
        if opened is None:
            raise FileNotFoundError(ref.describe())
        if ref.role == DATA:
            return opened.data
        if ref.role == HEADER:
            kind = opened.header_kind(ref.parts[0])
            if kind is None:
                raise FileNotFoundError(ref.describe())
            return opened.header_file(kind)
        found = opened.names.resolve(ref.parts)
        if found is None or found[1] is None:
            raise FileNotFoundError(ref.describe())  # gone with a resize
        return opened.chunk_file(found[1])

    def xattrs(self: TreeForFiles, ref: Ref) -> dict[str, bytes]:
        if ref.role == GROUP:
            return {**group_attributes(self._node(ref.path).attributes),
                    **views_attribute(self.group_views.names_in(ref.path))}
        opened = self.open_array(ref.path) if ref.role in (ARRAY, DATA) else None
        if opened is None:
            return {}
        if opened.directory is not None:
            views = [name for name in opened.directory.entries() if name != CHUNKS_NAME]
            return {**opened.directory.xattrs(), **views_attribute(views)}
        strings = opened.strings  # (its text, and data.h5 of strings)
        return {} if strings is None else {**strings.xattrs(), **views_attribute(list(strings.files))}

    def sharing_bytes(self: TreeForFiles, ref: Ref) -> list[int]:
        """Inodes the kernel may cache that show the same bytes as `ref` (a chunk file's
        bytes are also in `data` and headers such as `data.npy`), so a write to `ref` must make them stale."""
        if ref.role not in (CHUNK, DATA, HEADER):
            return []
        others = [Ref(ref.path, DATA), *(Ref(ref.path, HEADER, (n,)) for n in SHARING_DATA),
                  *self.group_views.showing(ref.path)]
        found = (self.inodes.known(other) for other in others if other != ref)
        return [number for number in found if number is not None]


def _chunk_ref(opened: ArrayDirectory | None, directory: Ref, name: str) -> Ref | None:
    """The entry `name` of a directory under an array's `chunks/`."""
    parts = (*directory.parts, name)
    found = opened.names.resolve(parts) if opened else None
    if found is None:
        return None
    return Ref(directory.path, CHUNKS if found[0] == "dir" else CHUNK, parts)
