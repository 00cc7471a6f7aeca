"""The node tree a mount serves: group directories, array directories and their files.

Groups are discovered lazily: a group's children are read from its consolidated metadata or,
without it, learnt as they are asked for (`formats.children`: listing its directory, OME-Zarr
metadata, probing a name looked up), so stores that list nothing (HTTP) work too. Arrays are
opened on first use; one that cannot be opened shows its metadata files only (and `data.txt`
for strings or bytes), the log saying why once. After a resize, what the kernel may cache of
the array's files is queued (`take_stale`) for the fuse layer to invalidate. What each node
shows the fuse layer (entries, lookups, files, extended attributes) is read in `node_files`.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ..array import Shared, ZarrArray
from ..array_metadata import array_of
from ..errors import EditRefused, ZarrfsError
from ..formats import GroupChildren, NodeMetadata
from ..formats.documents import node_documents
from ..formats.nodes import join_path
from ..formats.ome_children import declared_below
from ..store import Store
from ..views import RegionArray
from ..views.array_dir import ArrayDirectory, ViewSettings
from ..views.registry import ARRAY_FILE_VIEWS, NpyHeader
from .edits import Edits, Stale
from .file_revisions import FileRevisions
from .group_recheck import GroupRecheck
from .group_views import GroupViews
from .inodes import ARRAY, CHUNK, CHUNKS, DATA, GROUP, HEADER, METADATA, UPLOAD, InodeTable, Ref
from .metadata_files import MetadataFiles
from .metadata_generations import MetadataGenerations
from .new_arrays import NewArrays, array_name
from .node_files import NodeFiles, OpenedArray
from .placement import placement_finder
from .reshapes import Reshapes
from .string_arrays import StringFiles, string_files
from .uploads import Uploads

log = logging.getLogger(__name__)


class Tree(NodeFiles):
    shows_versions = False  # (`.versions/` at the root: VersionedTree)

    def __init__(self, store: Store, root: NodeMetadata, shared: Shared, view_settings: ViewSettings, *,
                 rechecks: bool = False) -> None:
        """`rechecks`: other writers may change the store while it is mounted."""
        self.store = store
        self.rechecks = rechecks
        self.shared = shared
        self.view_settings = view_settings
        self.root = Ref("", GROUP if root.kind == "group" else ARRAY)
        self.inodes = InodeTable(self.root)
        self._lock = threading.RLock()
        self._nodes: dict[str, NodeMetadata] = {"": root}
        self._children: dict[str, GroupChildren] = {}
        self._arrays: dict[str, OpenedArray] = {}
        self.metadata = MetadataFiles(store, lambda path: self._node(path).raw)
        self.generations = MetadataGenerations(store)  # (what rechecks compare metadata with)
        self._stale = Stale()
        self.edits = Edits(self)
        self.uploads = Uploads()
        self.groups = GroupRecheck(self)
        self.new_arrays = NewArrays()
        self.group_views = GroupViews(self, view_settings)
        self.reshapes = Reshapes(self)
        self.file_revisions = FileRevisions(self)  # (what each file's bytes depend on: ETags)

    def inode(self, ref: Ref) -> int:
        return self.inodes.number(ref)

    def _node(self, path: str) -> NodeMetadata:
        with self._lock:
            found = self._nodes.get(path)
        return found if found is not None else self._learnt(path)

    def _learnt(self, path: str) -> NodeMetadata:
        """A node the kernel names by an inode it kept across a move (its files): found anew."""
        parent, _, name = path.rpartition("/")
        child = self._group_child(parent, name) if path and self._node(parent).kind == "group" else None
        if child is None:
            raise FileNotFoundError(path)
        return child

    def group_children(self, path: str) -> dict[str, NodeMetadata]:
        return self._remembered(self.children_of(path).all())

    def _group_child(self, path: str, name: str) -> NodeMetadata | None:
        child = self.children_of(path).find(name)
        return None if child is None else self._remembered({name: child})[name]

    def _remembered(self, children: dict[str, NodeMetadata]) -> dict[str, NodeMetadata]:
        with self._lock:
            self._nodes.update({c.path: c for c in children.values() if c.path not in self._nodes})
        return children

    def children_of(self, path: str) -> GroupChildren:
        with self._lock:
            known = self._children.get(path)
            if known is None:
                declared = declared_below(path, self._attributes)
                known = self._children[path] = GroupChildren(self._nodes[path], self.generations.get,
                                                             self._list_dirs, declared=declared)
            return known

    def _list_dirs(self, path: str) -> Sequence[str]:
        """One attempt: where a store cannot list (HTTP), what is known is shown at once."""
        return self.store.without_retries().list_dirs(path)

    def _attributes(self, path: str) -> Mapping[str, Any] | None:
        with self._lock:
            node = self._nodes.get(path)
        return None if node is None else node.attributes

    # -- arrays ------------------------------------------------------------------------------

    def open_array(self, path: str) -> OpenedArray:
        with self._lock:
            opened = self._arrays.get(path)
            if opened is not None:
                return opened
            node = self._nodes.get(path) or self._learnt(path)  # (rare: after a move)
            opened = self._arrays[path] = self._open(node)
        if self.rechecks and opened.directory is not None:  # (may ask the store: not under the tree's lock)
            self.generations.opened(path, node.files[0])
        return opened

    def _open(self, node: NodeMetadata) -> OpenedArray:
        try:
            array = array_of(self.store, node, shared=self.shared)
        except ZarrfsError as e:
            strings, problem = string_files(self.store, node, str(e), self.view_settings.views)
            if strings is None:
                log.warning("array %s is shown as metadata only: %s", node.path or "/", problem)
            return OpenedArray(None, problem, strings)
        where = placement_finder(node, array.metadata, self.node, self._group_child,
                                 lambda path: self.open_array(path).directory)
        directory = ArrayDirectory(array, self.view_settings, placement=where,  # (resized after it is made)
                                   on_resize=lambda shape: self.reshapes.resized(node.path, directory, shape),
                                   path=node.path)
        return OpenedArray(directory, None)

    def opened_arrays(self) -> list[ZarrArray]:
        with self._lock:
            return [o.directory.array for o in self._arrays.values() if o.directory is not None]

    def opened_array(self, path: str) -> ZarrArray | None:
        """The array at `path` if it was opened (None: not yet, or it cannot be), opening none."""
        with self._lock:
            opened = self._arrays.get(path)
        return None if opened is None or opened.directory is None else opened.directory.array

    def strings_of(self, path: str) -> StringFiles | None:
        """The array of strings or bytes at `path` if it was opened, opening none."""
        with self._lock:
            opened = self._arrays.get(path)
        return None if opened is None else opened.strings

    def shown_arrays(self, ref: Ref) -> list[str]:
        """The paths of the arrays a group's file shows (`group_views`)."""
        return self.group_views.level_paths(ref.path, ref.parts[0])

    # -- other writers ---------------------------------------------------------------------

    def recheck(self, ref: Ref) -> bool:
        """Whether another writer changed what the file `ref` shows since it was last looked
        at (close-to-open; remote: the chunks asked about beside the metadata, a round trip
        sooner). Stale cached chunks are dropped; a new shape is taken, and what the kernel
        caches of the array's files is queued as stale (`take_stale`)."""
        if self.group_views.serves(ref):  # (its size changes with any array's: the kernel is told)
            changed = self.group_views.recheck(ref.path, ref.parts[0])
            self._stale.inodes += [self.inode(ref)] if changed else []
            return changed
        if ref.role == METADATA and self._node(ref.path).kind == "group":
            return self.groups.recheck_document(ref.path, ref.parts[0])
        if ref.role == METADATA:  # (an array's: its shape, as opening its other files takes it)
            opened = self.open_array(ref.path).directory
            return opened is not None and self.reshapes.recheck(ref.path, opened)
        if ref.role not in (DATA, HEADER, CHUNK):
            return False
        opened = self.open_array(ref.path).directory
        if opened is None:
            return False
        header = ref.role == HEADER and opened.header_kind(ref.parts[0]) in ARRAY_FILE_VIEWS
        found = opened.names.resolve(ref.parts) if ref.role == CHUNK else None
        chunks = None if ref.role != CHUNK else [] if found is None or found[1] is None else [found[1]]
        beside = opened.array.start_recheck(chunks) if self.store.capabilities.round_trips else None
        reshaped = self.reshapes.recheck(ref.path, opened)
        if header:
            opened.refetch_files()
        return bool(beside.result() if beside is not None else opened.array.recheck(chunks)) or reshaped

    # -- a new shape (`reshapes`) ------------------------------------------------------------

    def show_new_metadata(self, path: str, opened: ArrayDirectory) -> None:
        """The opened array's metadata document, as it is now, shown; its files' sizes stale."""
        with self._lock:
            node = self._nodes[path]
            raw = {**node.raw, node.files[0]: opened.array.raw_metadata}
            documents = {**node.documents, **node_documents({node.files[0]: raw[node.files[0]]})}
            self._nodes[path] = dataclasses.replace(node, raw=raw, documents=documents)
            self.metadata.forget(path, node.files[:1])
        self._queue_stale(path, opened)

    def _queue_stale(self, path: str, opened: ArrayDirectory) -> None:
        """What the kernel caches of a reshaped array: sizes, and names that are gone."""
        with self._lock:
            for number, ref in self.inodes.refs_below(path):
                if ref.role in (DATA, HEADER, METADATA):
                    self._stale.inodes.append(number)
                elif ref.role in (CHUNK, CHUNKS) and ref.parts and opened.names.resolve(ref.parts) is None:
                    parent = Ref(path, CHUNKS, ref.parts[:-1])
                    self._stale.entries.append((self.inode(parent), ref.parts[-1]))
            self._stale.inodes += [n for r in self.group_views.showing(path) if (n := self.inodes.known(r))]

    # -- changes made through the mount (`edits`) -------------------------------------------

    def node(self, path: str) -> NodeMetadata | None:
        with self._lock:
            return self._nodes.get(path)

    def replace_node(self, node: NodeMetadata) -> None:
        """Show a node's new metadata (its files' sizes change: the kernel is told)."""
        with self._lock:
            self._nodes[node.path] = node
            self.metadata.forget(node.path, node.files)
            known = self.inodes.refs_below(node.path)
            self._stale.inodes += [n for n, r in known if r.role in (METADATA, GROUP, ARRAY)]

    def adopt_attributes(self, path: str, attributes: Mapping[str, Any], raw: bytes | None) -> None:
        """An opened array's new attributes (and v3 metadata document, kept for a resize)."""
        opened = self._arrays.get(path)
        array = None if opened is None or opened.directory is None else opened.directory.array
        if array is not None:
            array.metadata = dataclasses.replace(array.metadata, attributes=dict(attributes))
            array.raw_metadata = raw if raw is not None else array.raw_metadata

    def forget_below(self, path: str, *, flush: bool) -> None:
        """Forget the node at `path` and everything below (deleted or moved): opened arrays
        are flushed first if `flush`, else what they hold unwritten is dropped."""
        with self._lock:
            below = [p for p in self._nodes if p == path or p.startswith(path + "/")]
            arrays = [self._arrays.pop(p) for p in below if p in self._arrays]
            for p in below:
                self._nodes.pop(p, None)
                self._children.pop(p, None)
            self.generations.forget(below)
            self.metadata.forget_paths(below)
        for opened in arrays:
            if opened.directory is not None:
                if flush:
                    opened.directory.array.flush()
                opened.directory.array.close()

    # -- arrays made by writing .npy files, and other writers' nodes --------------------------

    def begin_upload(self, group: str, file_name: str, openers: int = 1) -> Ref:
        name = array_name(file_name)
        if self._group_child(group, name) is not None:
            raise EditRefused(errno.EEXIST, f"{join_path(group, name)} exists")
        self.uploads.begin(group, file_name, lambda header: self._array_from(group, name, header), openers)
        return Ref(group, UPLOAD, (file_name,))

    def _array_from(self, group: str, name: str, header: NpyHeader) -> RegionArray:
        child = self.edits.create_node(group, name, lambda f: self.new_arrays.files(f, header))
        self._remembered({name: child})
        opened = self.open_array(join_path(group, name))
        if opened.directory is None:
            raise EditRefused(errno.EIO, f"{name}: made, but cannot be opened: {opened.problem}")
        return opened.directory.array  # type: ignore[no-any-return]

    def upload_closed(self, ref: Ref, *, released: bool = True) -> None:
        """An opener of a .npy file closed it; after the last, the name is gone (the array stays)."""
        if self.uploads.closed(ref.path, ref.parts[0], released=released):
            self.child_gone(ref.path, ref.parts[0])

    def abandon_upload(self, ref: Ref) -> None:
        """A write of a .npy file failed: a name that made no array is free again at once."""
        if self.uploads.abandoned(ref.path, ref.parts[0]):
            self.child_gone(ref.path, ref.parts[0])

    def replace_group(self, node: NodeMetadata) -> None:
        """A group's metadata read again: its children are learnt from it again."""
        self.replace_node(node)
        with self._lock:
            self._children.pop(node.path, None)

    def child_gone(self, parent: str, name: str) -> None:
        """Another writer deleted `name` (or a .npy file written was closed): forgotten, and
        what the kernel holds of it stale."""
        self.children_of(parent).remove(name)
        self.forget_below(join_path(parent, name), flush=False)
        with self._lock:
            self._stale.entries.append((self.inode(Ref(parent, GROUP)), name))

    def take_stale(self) -> Stale:
        with self._lock:
            stale, self._stale = self._stale, Stale()
        return stale

    def close(self) -> None:
        for array in self.opened_arrays():
            array.close()
