"""Other writers' new and deleted nodes (`recheck=open`): looking into a group (listing it, or
looking up a name it does not have) asks the store again what the group holds, at most once
per `RECHECK_INTERVAL` per group.

A group known from consolidated metadata is what the document holding that metadata says
(zarr-python trusts it too): its generation is asked (one HEAD), and only when it changed is
it read again. Any other group is listed again (one listing); names the listing adds are
read, names it no longer has are gone. What the store is asked is asked without locks held,
so a store that does not answer holds up nobody else; the caller bounds the wait.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from ..errors import ZarrfsError
from ..formats import GroupChildren, NodeMetadata, consolidated_children, discover
from ..formats.nodes import join_path
from ..formats.registry import format_of
from ..store import Store
from .metadata_generations import MetadataGenerations

log = logging.getLogger(__name__)
RECHECK_INTERVAL = 1.0


class TreeForRecheck(Protocol):
    """What a recheck needs of the tree (implemented by `Tree`)."""

    store: Store
    generations: MetadataGenerations

    def node(self, path: str) -> NodeMetadata | None: ...
    def children_of(self, path: str) -> GroupChildren: ...
    def replace_group(self, node: NodeMetadata) -> None: ...
    def replace_node(self, node: NodeMetadata) -> None: ...
    def child_gone(self, parent: str, name: str) -> None: ...


class GroupRecheck:
    def __init__(self, groups: TreeForRecheck, clock: Callable[[], float] = time.monotonic) -> None:
        self.groups = groups
        self._clock = clock
        self._lock = threading.Lock()
        self._checked: dict[str, float] = {}
        self._generations: dict[str, str | None] = {}  # of the consolidated documents read

    def due(self, path: str) -> bool:
        """Whether the group at `path` may be asked about again now (then it is counted as asked)."""
        now = self._clock()
        with self._lock:
            if now - self._checked.get(path, -RECHECK_INTERVAL) < RECHECK_INTERVAL:
                return False
            self._checked[path] = now
            return True

    def recheck(self, path: str) -> bool:
        """Ask the store what the group at `path` holds now; whether that changed."""
        node = self.groups.node(path)
        if node is None or node.kind != "group":
            return False
        owner = self._consolidated_owner(node)
        if owner is not None:
            return self._recheck_consolidated(owner, path)
        return self._recheck_listing(self.groups.children_of(path))

    def recheck_document(self, path: str, name: str) -> bool:
        """Whether another writer changed the group at `path` since its metadata file `name`
        was read (close-to-open, one request; its attributes then read again). A group known
        from consolidated metadata follows that document (one request too), as its children do."""
        node = self.groups.node(path)
        if node is None or node.kind != "group":
            return False
        if node.consolidated is not None:
            return self.recheck(path)
        if not self.groups.generations.document_changed(join_path(path, name), node.raw.get(name)):
            return False
        fresh = discover(self.groups.store.without_retries().get, path, (node.zarr_format,),
                         consolidated_first=False)
        if fresh is None or fresh.kind != "group":
            return False  # (deleted, or now an array: its parent's recheck tells)
        log.info("group %s: its metadata changed", path or "/")
        self.groups.replace_node(fresh)
        return True

    def _consolidated_owner(self, node: NodeMetadata) -> NodeMetadata | None:
        """The group whose stored document holds the consolidated metadata `node`'s children
        come from: itself, or the group above it that was read from the store."""
        if node.consolidated is None:
            return None
        path: str | None = node.path
        while path is not None:
            found = self.groups.node(path)
            if found is not None and format_of(found).consolidated_file in found.raw:
                return found
            path = None if not path else path.rpartition("/")[0]
        return None

    def _recheck_consolidated(self, owner: NodeMetadata, path: str) -> bool:
        name = format_of(owner).consolidated_file
        assert name is not None  # (`_consolidated_owner` found it)
        key = join_path(owner.path, name)
        generation = self.groups.store.without_retries().generation(key)
        with self._lock:
            if owner.path in self._generations and self._generations[owner.path] == generation:
                return False
            first = owner.path not in self._generations
            self._generations[owner.path] = generation
        fresh = discover(self.groups.store.without_retries().get, owner.path,
                         (owner.zarr_format,), consolidated_first=True)
        if fresh is None or fresh.consolidated is None:
            return False  # (deleted, or no longer consolidated: a remount tells)
        if first and fresh.raw.get(name) == owner.raw.get(name):
            return False
        log.info("group %s: its consolidated metadata changed", owner.path or "/")
        changed = False
        for group_path in [owner.path, *([path] if path != owner.path else [])]:
            now = _descend(fresh, group_path[len(owner.path):].lstrip("/"))
            if now is not None and now.kind == "group":
                changed = self._apply(group_path, set(consolidated_children(now) or {}), now) or changed
        return changed

    def _apply(self, path: str, names: set[str], fresh: NodeMetadata) -> bool:
        """The group at `path` as read again; whether its children or its own metadata changed."""
        before = set(self.groups.children_of(path).known())
        shown = self.groups.node(path)
        self.groups.replace_group(fresh)
        for name in before - names:
            self.groups.child_gone(path, name)
        return before != names or shown is None or shown.raw != fresh.raw

    def _recheck_listing(self, children: GroupChildren) -> bool:
        path = children.node.path
        try:
            listed = set(self.groups.store.without_retries().list_dirs(path))
        except ZarrfsError:
            return False  # (a store that cannot list: what is known stays)
        known = children.known()
        changed = False
        for name in sorted(listed - set(known)):
            child = children.discovered(name) if not name.startswith(".") else None
            if child is not None:
                children.add(child)
                changed = True
        if not listed:
            return changed  # (a store that lists nothing, as HTTP: what is known stays)
        for name in set(known) - listed:
            self.groups.child_gone(path, name)
            changed = True
        return changed


def _descend(node: NodeMetadata, relative: str) -> NodeMetadata | None:
    for name in relative.split("/") if relative else ():
        found = (consolidated_children(node) or {}).get(name)
        if found is None:
            return None
        node = found
    return node
