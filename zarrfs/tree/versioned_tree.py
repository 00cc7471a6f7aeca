"""The tree of a mount whose store has versions: the `Tree`, with `.versions/` at its root
(`versions`). What is below a version directory is the tree's own groups and arrays at the
path `.versions/KIND/NAME/...`; this adds the directories above them, the log, and the
version's root group, read when its directory is first entered."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ..array import Shared
from ..errors import ReadOnlyError, ZarrfsError
from ..formats import NodeMetadata, discover
from ..store import Store
from ..store.versions import VERSIONS, Catalog, catalog_of
from ..views import FileView
from ..views.array_dir import ViewSettings
from .edits import Edits, Stale, TreeForEdits
from .inodes import GROUP, VERSION_LOG, Ref
from .tree import Tree
from .versions import Versions, in_versions, version_root

log = logging.getLogger(__name__)


def tree_of(store: Store, root: NodeMetadata, shared: Shared, view_settings: ViewSettings, *,
            rechecks: bool = False) -> Tree:
    """The tree of `store`: with `.versions/` when the store has versions and its root is a group."""
    catalog = catalog_of(store)
    if catalog is None or root.kind != "group":
        return Tree(store, root, shared, view_settings, rechecks=rechecks)
    return VersionedTree(store, root, shared, view_settings, catalog, rechecks=rechecks)


class VersionedTree(Tree):
    shows_versions = True

    def __init__(self, store: Store, root: NodeMetadata, shared: Shared, view_settings: ViewSettings,
                 catalog: Catalog, *, rechecks: bool = False) -> None:
        super().__init__(store, root, shared, view_settings, rechecks=rechecks)
        self.versions = Versions(catalog)
        self.edits = VersionEdits(self, self.versions)
        self._versions_lock = threading.Lock()
        self._stale_logs: list[int] = []  # (the log's inode, when its size changed)

    def names(self, directory: Ref) -> Sequence[str]:
        if self.versions.serves(directory):
            return self.versions.names(directory)
        self._know_version(directory.path)
        names = super().names(directory)
        return [*names, VERSIONS] if directory == self.root else names

    def lookup(self, directory: Ref, name: str) -> Ref | None:
        if self.versions.serves(directory):
            return self.versions.lookup(directory, name, self._known_version)
        if directory == self.root and name == VERSIONS:
            return self.versions.top
        self._know_version(directory.path)
        return super().lookup(directory, name)

    def file(self, ref: Ref) -> FileView:
        return self.versions.file(ref) if ref.role == VERSION_LOG else super().file(ref)

    def xattrs(self, ref: Ref) -> dict[str, bytes]:
        if self.versions.serves(ref):
            return {}
        self._know_version(ref.path)
        return super().xattrs(ref)

    def recheck(self, ref: Ref) -> bool:
        if ref.role != VERSION_LOG:
            return super().recheck(ref)
        changed = self.versions.recheck()
        if changed:  # (its size: the kernel is told)
            with self._versions_lock:
                self._stale_logs.append(self.inode(ref))
        return changed

    def take_stale(self) -> Stale:
        stale = super().take_stale()
        with self._versions_lock:
            stale.inodes += self._stale_logs
            self._stale_logs = []
        return stale

    def _know_version(self, path: str) -> None:
        """The root group of the version at `path` read, if it is one (FileNotFoundError: gone)."""
        if version_root(path) and not self._known_version(path):
            raise FileNotFoundError(path)

    def _known_version(self, path: str) -> bool:
        """Whether `path` is a version whose root group the tree knows (read now if not)."""
        if self.node(path) is not None:
            return True
        try:
            node = discover(self.store.get, path)
        except ZarrfsError as e:
            log.warning("the version %s cannot be shown: %s", path, e)
            return False
        if node is not None and node.kind != "group":
            log.warning("the version %s is not shown: its root is an array, the mount's a group", path)
            return False
        if node is not None:
            self.replace_node(node)
        return node is not None


class VersionEdits(Edits):
    """Edits below `.versions` are refused, but for a new tag or branch (`mkdir`)."""

    def __init__(self, nodes: TreeForEdits, versions: Versions) -> None:
        super().__init__(nodes)
        self.versions = versions

    def create_group(self, parent_path: str, name: str) -> NodeMetadata:
        if not in_versions(Ref(parent_path, GROUP)):
            return super().create_group(parent_path, name)
        self.versions.create(parent_path, name)
        made = discover(self.store.get, f"{parent_path}/{name}")
        if made is None:
            raise ReadOnlyError(f"{parent_path}/{name}: made, but it cannot be read")
        return made

    def set_attributes(self, path: str, attributes: Mapping[str, Any]) -> None:
        _refuse_in_versions(path)
        super().set_attributes(path, attributes)

    def delete(self, path: str, recursive: bool = False) -> None:
        _refuse_in_versions(path)
        super().delete(path, recursive)

    def move(self, path: str, parent_path: str, name: str, *, replace: bool = True) -> NodeMetadata:
        _refuse_in_versions(path)
        _refuse_in_versions(parent_path)
        return super().move(path, parent_path, name, replace=replace)


def _refuse_in_versions(path: str) -> None:
    if in_versions(Ref(path, GROUP)):
        raise ReadOnlyError(f"{path}: the versions are read-only")
