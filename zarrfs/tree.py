"""The node tree a mount serves: group directories, array directories and their files.

A node is named by a `Ref`: the store path of its group or array, its role, and for metadata
and chunk files the name parts below it. Inode numbers are a hash of the Ref, so they depend
on the node's path and role only (never on an array's shape) and are the same in every mount.
The table from inode back to Ref holds what the kernel holds (lookup counts, `forget`).

Groups are discovered lazily: a group's children are read from its consolidated metadata or,
without it, by listing its directory when it is first looked into. Arrays are opened on first
use; one that cannot be opened (or whose elements have no fixed size) is shown with its
metadata files only, and the log says why once.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from .array import Shared, ZarrArray
from .errors import ZarrfsError
from .formats import NodeMetadata, children_of
from .grid import Box
from .store import Store
from .views import BytesFile, ChunkNames, FileView, RegionFile, array_attributes, group_attributes

log = logging.getLogger(__name__)

GROUP, ARRAY, METADATA, DATA, CHUNKS, CHUNK = "group", "array", "metadata", "data", "chunks", "chunk"
DATA_NAME, CHUNKS_NAME = "data", "chunks"
ROOT_INODE = 1


@dataclass(frozen=True)
class Ref:
    path: str  # the group or array it belongs to ("" for the root)
    role: str
    parts: tuple[str, ...] = ()  # a metadata file's name; the key parts below chunks/

    @property
    def is_dir(self) -> bool:
        return self.role in (GROUP, ARRAY, CHUNKS)

    def describe(self) -> str:
        return "/".join(p for p in (self.path, *self._names()) if p) or "/"

    def _names(self) -> tuple[str, ...]:
        if self.role in (CHUNKS, CHUNK):
            return (CHUNKS_NAME, *self.parts)
        return (DATA_NAME,) if self.role == DATA else self.parts


@dataclass
class OpenedArray:
    array: ZarrArray | None
    problem: str | None
    data: RegionFile | None = None
    names: ChunkNames | None = None


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


class Tree:
    def __init__(self, store: Store, root: NodeMetadata, shared: Shared, byteorder: str) -> None:
        self.store = store
        self.shared = shared
        self.byteorder = byteorder
        self.root = Ref("", GROUP if root.kind == "group" else ARRAY)
        self._lock = threading.RLock()
        self._nodes: dict[str, NodeMetadata] = {"": root}
        self._children: dict[str, dict[str, NodeMetadata]] = {}
        self._arrays: dict[str, OpenedArray] = {}
        self._metadata_files: dict[tuple[str, str], bytes] = {}
        self._refs: dict[int, Ref] = {ROOT_INODE: self.root}
        self._lookups: dict[int, int] = {}

    # -- inodes ------------------------------------------------------------------------------

    def inode(self, ref: Ref) -> int:
        if ref == self.root:
            return ROOT_INODE
        text = "\0".join((ref.path, ref.role, *ref.parts)).encode()
        number = int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") >> 1
        return number if number > ROOT_INODE else number + 2

    def remember(self, ref: Ref) -> int:
        """The inode of a node handed to the kernel (it now holds one more lookup of it)."""
        number = self.inode(ref)
        with self._lock:
            known = self._refs.setdefault(number, ref)
            if known != ref:
                log.error("inode collision between %s and %s", known.describe(), ref.describe())
            self._lookups[number] = self._lookups.get(number, 0) + 1
        return number

    def ref(self, inode: int) -> Ref | None:
        with self._lock:
            return self._refs.get(inode)

    def known_inode(self, ref: Ref) -> int | None:
        number = self.inode(ref)
        with self._lock:
            return number if number in self._refs else None

    def sharing_bytes(self, ref: Ref) -> list[int]:
        """Inodes the kernel may cache that show the same bytes as `ref` (a chunk file's
        bytes are also in its array's `data`), so a write to `ref` must make them stale."""
        if ref.role != CHUNK:
            return []
        data = self.known_inode(Ref(ref.path, DATA))
        return [] if data is None else [data]

    def forget(self, inode: int, count: int) -> None:
        with self._lock:
            left = self._lookups.get(inode, 0) - count
            if left > 0:
                self._lookups[inode] = left
            elif inode != ROOT_INODE:
                self._lookups.pop(inode, None)
                self._refs.pop(inode, None)

    # -- names -------------------------------------------------------------------------------

    def names(self, directory: Ref) -> Sequence[str]:
        """A directory's entries in a stable order (lazily generated for chunk grids)."""
        if directory.role == CHUNKS:
            names = self.open_array(directory.path).names
            return names.names(directory.parts) if names else []
        node = self._node(directory.path)
        if directory.role == GROUP:
            return [*node.files, *self._group_children(directory.path)]
        opened = self.open_array(directory.path)
        return [*node.files, *((DATA_NAME, CHUNKS_NAME) if opened.array else ())]

    def lookup(self, directory: Ref, name: str) -> Ref | None:
        if directory.role == CHUNKS:
            names = self.open_array(directory.path).names
            parts = (*directory.parts, name)
            found = names.resolve(parts) if names else None
            if found is None:
                return None
            return Ref(directory.path, CHUNKS if found[0] == "dir" else CHUNK, parts)
        node = self._node(directory.path)
        if name in node.files:
            return Ref(directory.path, METADATA, (name,))
        if directory.role == GROUP:
            child = self._group_children(directory.path).get(name)
            if child is None:
                return None
            return Ref(child.path, GROUP if child.kind == "group" else ARRAY)
        opened = self.open_array(directory.path).array if directory.role == ARRAY else None
        if opened is not None and name in (DATA_NAME, CHUNKS_NAME):
            return Ref(directory.path, DATA) if name == DATA_NAME else Ref(directory.path, CHUNKS)
        return None

    def _node(self, path: str) -> NodeMetadata:
        with self._lock:
            return self._nodes[path]

    def _group_children(self, path: str) -> dict[str, NodeMetadata]:
        with self._lock:
            known = self._children.get(path)
        if known is not None:
            return known
        children = children_of(self._node(path), self.store.get, self.store.list_dirs)
        with self._lock:
            self._children[path] = children
            for child in children.values():
                self._nodes.setdefault(child.path, child)
        return children

    # -- arrays ------------------------------------------------------------------------------

    def open_array(self, path: str) -> OpenedArray:
        with self._lock:
            opened = self._arrays.get(path)
            if opened is None:
                opened = self._arrays[path] = self._open(self._nodes[path])
            return opened

    def _open(self, node: NodeMetadata) -> OpenedArray:
        try:
            description = node.describe()
            raw = node.raw.get(node.files[0], b"")
            array = ZarrArray(self.store.child(node.path), description, raw, shared=self.shared)
        except ZarrfsError as e:
            log.warning("array %s is shown as metadata only: %s", node.path or "/", e)
            return OpenedArray(None, str(e))
        whole = Box((0,) * description.rank, description.shape)
        names = ChunkNames(description.chunk_key_encoding, description.grid_shape)
        return OpenedArray(array, None, RegionFile(array, whole, self.byteorder), names)

    def opened_arrays(self) -> list[ZarrArray]:
        with self._lock:
            return [o.array for o in self._arrays.values() if o.array is not None]

    # -- files and attributes ----------------------------------------------------------------

    def file(self, ref: Ref) -> FileView:
        if ref.role == METADATA:
            return BytesFile(self._metadata_bytes(ref.path, ref.parts[0]))
        opened = self.open_array(ref.path)
        if opened.array is None or opened.data is None or opened.names is None:
            raise IsADirectoryError(ref.describe())
        if ref.role == DATA:
            return opened.data
        index = opened.names.resolve(ref.parts)
        if index is None or index[1] is None:
            raise IsADirectoryError(ref.describe())
        chunk_shape = opened.array.chunk_shape
        start = tuple(i * c for i, c in zip(index[1], chunk_shape, strict=True))
        stop = tuple(s + c for s, c in zip(start, chunk_shape, strict=True))
        return RegionFile(opened.array, Box(start, stop), self.byteorder, direct_io=True)

    def _metadata_bytes(self, path: str, name: str) -> bytes:
        """A metadata file as stored: read once (consolidated metadata has the documents,
        not the bytes), then kept."""
        key = (path, name)
        with self._lock:
            known = self._nodes[path].raw.get(name, self._metadata_files.get(key))
        if known is None:
            known = self.store.get(_join(path, name)) or b""
            with self._lock:
                self._metadata_files[key] = known
        return known

    def xattrs(self, ref: Ref) -> dict[str, bytes]:
        if ref.role not in (GROUP, ARRAY, DATA):
            return {}
        node = self._node(ref.path)
        if ref.role == GROUP:
            return group_attributes(node.attributes)
        opened = self.open_array(ref.path)
        if opened.array is None or opened.data is None:
            return group_attributes(node.attributes)
        sharding = opened.array.sharding
        return array_attributes(opened.array.metadata, opened.data.file_dtype,
                                sharding.inner_shape if sharding else None)

    def total_bytes(self) -> int:
        opened = self.open_array("") if self.root.role == ARRAY else None
        return opened.data.size if opened and opened.data else 0

    def close(self) -> None:
        for array in self.opened_arrays():
            array.close()
