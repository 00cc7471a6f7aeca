"""Changes to the node tree made through the mount: a node's attributes, new groups, deleting
and moving groups and arrays, and the consolidated metadata of every group above a change.

Every metadata write is a compare-and-swap (`rewrite`): the document is read with its
generation, edited, and put only if it is still that one; a lost race reads, edits and tries
again, so two mounts adding children to one group keep both. The order of the writes leaves
the store readable at every step: a new node's metadata is written before the consolidated
metadata names it; a deleted one's metadata is deleted first, then its chunks, then the names
above it.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import ConflictError, EditRefused, MetadataError
from ..formats import GroupChildren, NodeMetadata, discover
from ..formats.documents import (
    ConsolidatedNodes,
    drop_subtree,
    edit_consolidated,
    new_group,
    node_documents,
    set_attributes,
    valid_child_name,
    with_attributes,
)
from ..formats.nodes import child_formats, join_path
from ..formats.registry import consolidated_file, format_of, misplaced
from ..store import ANY, Expect, Store, prefixes
from .inodes import InodeTable

log = logging.getLogger(__name__)
CAS_ATTEMPTS = 20
Edit = Callable[[bytes | None], bytes | None]  # a stored document (None: missing) -> its new bytes
NodeChange = Callable[[ConsolidatedNodes, str], None]  # (nodes, the changed node's relative path)


@dataclass
class Stale:
    """What the kernel may hold that a change made wrong: attributes and page cache of
    inodes, and names in directories (parent inode, name)."""

    inodes: list[int] = field(default_factory=list)
    entries: list[tuple[int, str]] = field(default_factory=list)


class TreeForEdits(Protocol):
    """What the tree offers its edits (implemented by `Tree`)."""

    store: Store
    inodes: InodeTable  # (told of moves and deletes: inode numbers follow the nodes)

    def node(self, path: str) -> NodeMetadata | None: ...
    def children_of(self, path: str) -> GroupChildren: ...
    def replace_node(self, node: NodeMetadata) -> None: ...
    def forget_below(self, path: str, *, flush: bool) -> None: ...
    def adopt_attributes(self, path: str, attributes: Mapping[str, Any], raw: bytes | None) -> None: ...


class Edits:
    def __init__(self, nodes: TreeForEdits) -> None:
        self.nodes = nodes
        self.store = nodes.store

    # -- attributes --------------------------------------------------------------------------

    def set_attributes(self, path: str, attributes: Mapping[str, Any]) -> None:
        node = self._existing(path)
        kept_in = format_of(node)
        name = kept_in.attributes_file
        new = self.rewrite(join_path(path, name),
                           lambda stored: _attributes_document(stored, node, attributes))
        assert new is not None
        documents = {**node.documents, name: node_documents({name: new}).get(name, dict(attributes))}
        files = node.files if name in node.files else (*node.files, name)
        self.nodes.replace_node(dataclasses.replace(node, files=files, documents=documents,
                                                    raw={**node.raw, name: new}))
        self.nodes.adopt_attributes(path, attributes, new if kept_in.attributes_in_metadata else None)
        self.update_consolidated(path, lambda nodes, relative: set_attributes(
            nodes, relative, node.zarr_format, attributes), including_itself=True)

    # -- new groups --------------------------------------------------------------------------

    def create_group(self, parent_path: str, name: str) -> NodeMetadata:
        return self.create_node(parent_path, name, new_group)

    def create_node(self, parent_path: str, name: str,
                    files_for: Callable[[int], dict[str, bytes]]) -> NodeMetadata:
        """A new group or array: `files_for(the parent's zarr_format)` are its metadata files
        (MetadataError, when the format cannot hold it, is EINVAL; nothing is stored)."""
        parent = self._group(parent_path)
        self._check_free(parent, name)
        path = join_path(parent_path, name)
        try:
            files = files_for(parent.zarr_format)
        except MetadataError as e:
            raise EditRefused(errno.EINVAL, f"{path}: {e}") from None
        absent: Expect = None if self.store.capabilities.conditional else ANY  # (nothing stored there yet)
        for key, raw in files.items():
            try:
                self.store.put(join_path(path, key), raw, expect=absent)
            except ConflictError:
                raise EditRefused(errno.EEXIST, f"{path} was created by another writer") from None
        child = discover(self.store.get, path, child_formats(parent))
        assert child is not None
        self.nodes.children_of(parent_path).add(child)
        self.update_consolidated(path, _listing(node_documents(files)))
        return child

    # -- deleting ----------------------------------------------------------------------------

    def delete(self, path: str, recursive: bool = False) -> None:
        """Delete the group or array at `path`; a group with children only if `recursive`."""
        node = self._existing(path)
        if not path:
            raise EditRefused(errno.EBUSY, "the mount's root cannot be deleted")
        if node.kind == "group" and not recursive and self.nodes.children_of(path).all():
            raise EditRefused(errno.ENOTEMPTY, f"group {path} is not empty")
        self.nodes.forget_below(path, flush=False)
        for name in node.files:  # first: nobody opens a half-deleted node
            if name != format_of(node).consolidated_apart:
                self.store.delete(join_path(path, name))
        removed = prefixes.delete_prefix(self.store, path)
        self._forget_deleted(node)
        log.info("deleted %s %s (%d keys)", node.kind, path, removed + len(node.files))

    def _forget_deleted(self, node: NodeMetadata) -> None:
        """The tree without `node`, deleted from the store."""
        self.nodes.inodes.deleted(node.path)  # (what is made here later is another node)
        self._parent_children(node.path).remove(node.name)
        self.update_consolidated(node.path, lambda nodes, relative: drop_subtree(nodes, relative))

    # -- moving ------------------------------------------------------------------------------

    def move(self, path: str, parent_path: str, name: str, *, replace: bool = True) -> NodeMetadata:
        """Move the group or array at `path` to `name` in the group `parent_path`; as rename(2)
        does, an empty group there is replaced (unless not `replace`: EEXIST), a non-empty one
        or an array is ENOTEMPTY. The replacement is atomic where the store can swap two
        prefixes (`prefixes.swap_prefixes`: locally), the empty group then removed from the old
        name; elsewhere it is deleted first, then the node moved."""
        node = self._existing(path)
        parent = self._group(parent_path)
        new_path = join_path(parent_path, name)
        if new_path == path:
            return node  # (rename(2) onto itself: nothing to do)
        if not path or new_path.startswith(path + "/"):
            raise EditRefused(errno.EINVAL, f"cannot move {path or '/'} into itself")
        problem = misplaced(node, parent)
        if problem is not None:
            raise EditRefused(errno.EINVAL, problem)
        replaced = self._replaced_by_move(parent_path, name) if replace else None
        if replaced is None:
            self._check_free(parent, name)
        self.nodes.forget_below(path, flush=True)
        moved: ConsolidatedNodes = {}
        swapped = replaced is not None and self._swapped(path, replaced)
        if replaced is not None and not swapped:
            self.delete(replaced.path)  # (not atomic: a reader may find neither name)
        if not swapped:
            prefixes.move_prefix(self.store, path, new_path)
        self.nodes.inodes.moved(path, new_path)  # (the same inode numbers at the new place)
        self._parent_children(path).remove(node.name)
        self.update_consolidated(path, lambda nodes, relative: _cut(nodes, relative, moved))
        child = discover(self.store.get, new_path, child_formats(parent), consolidated_first=False)
        if child is None:
            raise EditRefused(errno.EIO, f"{new_path}: nothing found after the move")
        self.nodes.children_of(parent_path).add(child)
        listed = moved or {"": node_documents(child.raw)}
        self.update_consolidated(new_path, lambda nodes, relative: _paste(nodes, relative, listed))
        return child

    def _replaced_by_move(self, parent_path: str, name: str) -> NodeMetadata | None:
        """The empty group at `name` that a move there replaces, as rename(2) does; None if
        the name is free."""
        target = self.nodes.children_of(parent_path).find(name)
        if target is None:
            return None
        if target.kind != "group":
            raise EditRefused(errno.ENOTEMPTY, f"{target.path} is an array")
        if self.nodes.children_of(target.path).all():
            raise EditRefused(errno.ENOTEMPTY, f"group {target.path} is not empty")
        return target

    def _swapped(self, path: str, replaced: NodeMetadata) -> bool:
        """The node at `path` swapped with the empty group it replaces in one step, where the
        store can (`prefixes.swap_prefixes`), and the group, now at `path`, deleted."""
        self.nodes.forget_below(replaced.path, flush=False)
        if not prefixes.swap_prefixes(self.store, path, replaced.path):
            return False
        prefixes.delete_prefix(self.store, path)
        self._forget_deleted(replaced)
        return True

    # -- consolidated metadata ---------------------------------------------------------------

    def update_consolidated(self, path: str, change: NodeChange, *, including_itself: bool = False) -> None:
        """Apply `change` to the consolidated metadata of every group above `path` that has
        some (and of `path` itself, a v2 group listing its own attributes, if asked)."""
        ancestors = [path] if including_itself and path else []
        above = path
        while above:
            above = above.rpartition("/")[0]
            ancestors.append(above)
        if including_itself and not path:
            ancestors.append("")
        for ancestor in ancestors:
            node = self.nodes.node(ancestor)
            name = None if node is None else consolidated_file(node)
            if node is None or name is None:
                continue  # (a group with none: nothing to read)
            relative = path[len(ancestor) + 1 :] if ancestor else path
            edit = _consolidated_edit(node.zarr_format, change, relative)
            new = self.rewrite(join_path(ancestor, name), edit)
            if new is not None:
                self.nodes.replace_node(dataclasses.replace(node, raw={**node.raw, name: new}))

    def rewrite(self, key: str, edit: Edit) -> bytes | None:
        """Put `edit(stored)` at `key` as a compare-and-swap, again after a lost race; the bytes
        put, or None when `edit` left the document alone."""
        for _ in range(CAS_ATTEMPTS):
            found = self.store.read(key)
            new = edit(None if found is None else bytes(found.data))
            if new is None:
                return None
            read_at = None if found is None else found.generation
            expect = read_at if self.store.capabilities.conditional else ANY
            try:
                self.store.put(key, new, expect=expect)
                return new
            except ConflictError:
                log.info("%s changed while it was edited: editing it again", key)
        raise ConflictError(key)

    # -- checks ------------------------------------------------------------------------------

    def _existing(self, path: str) -> NodeMetadata:
        node = self.nodes.node(path)
        if node is None:
            raise FileNotFoundError(path)
        return node

    def _group(self, path: str) -> NodeMetadata:
        node = self._existing(path)
        if node.kind != "group":
            raise EditRefused(errno.ENOTDIR, f"{path} is an array, not a group")
        return node

    def _check_free(self, parent: NodeMetadata, name: str) -> None:
        if not valid_child_name(name):
            raise EditRefused(errno.EINVAL, f"{name!r} cannot name a group or array")
        path = join_path(parent.path, name)
        if self.nodes.children_of(parent.path).find(name) is not None or any(
                True for _ in self.store.list(path)):
            raise EditRefused(errno.EEXIST, f"{path} exists")

    def _parent_children(self, path: str) -> GroupChildren:
        return self.nodes.children_of(path.rpartition("/")[0])


def _attributes_document(stored: bytes | None, node: NodeMetadata, attributes: Mapping[str, Any]) -> bytes:
    return with_attributes(stored, node.zarr_format, attributes)


def _consolidated_edit(zarr_format: int, change: NodeChange, relative: str) -> Edit:
    def edit(stored: bytes | None) -> bytes | None:
        if stored is None:
            return None
        return edit_consolidated(stored, zarr_format, lambda nodes: change(nodes, relative))
    return edit


def _listing(files: dict[str, Any]) -> NodeChange:
    def add(nodes: ConsolidatedNodes, relative: str) -> None:
        nodes[relative] = dict(files)
    return add


def _cut(nodes: ConsolidatedNodes, relative: str, into: ConsolidatedNodes) -> None:
    """Drop a subtree, keeping its entries (relative to it) in `into` for `_paste`."""
    for path in [p for p in nodes if p == relative or p.startswith(relative + "/")]:
        into.setdefault(path[len(relative) + 1 :] if path != relative else "", nodes[path])
    drop_subtree(nodes, relative)


def _paste(nodes: ConsolidatedNodes, relative: str, entries: ConsolidatedNodes) -> None:
    for path, files in entries.items():
        nodes[join_path(relative, path)] = files
