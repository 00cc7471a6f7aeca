"""What is known of a group's children, and how more is learnt, for stores that can be listed
and for those that cannot (HTTP servers, CDNs and bucket website endpoints list nothing).

In order of trust: consolidated metadata names every child (nothing else is asked); else a
listing of the group's directory, which is complete when it names anything; else the children
the OME-Zarr metadata of the group or its ancestors names (`ome_children`), each probed; and
any name looked up is probed: `NAME/zarr.json` in a v3 group, `NAME/.zarray`, `.zgroup`
(then `.zmetadata`) and v1's `meta` in a v2 one. Only names that could be nodes are probed
(not hidden names, editor temporaries, names the formats reserve), and a miss is remembered
for `MISS_SECONDS`, as a failed listing is, so that shells and `ls` do not ask a server the
same thing again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

from ..errors import MetadataError, RefusedKey, ZarrfsError
from .nodes import ALL_FORMATS, Get, NodeMetadata, child_formats, consolidated_children, discover, join_path
from .ome_children import declared_below
from .v3 import METADATA_KEY

log = logging.getLogger(__name__)
ListDirs = Callable[[str], Sequence[str]]  # a store's directory names below a prefix
Clock = Callable[[], float]

# How long a name found missing (or a listing that failed) is taken as still so.
MISS_SECONDS = 60.0
_TEMPORARY_SUFFIXES = ("~", ".swp", ".swx", ".swo", ".tmp", ".part")
# The children a listing names are looked at together: on a remote store, `ls` of a group of
# N children costs N / 16 round trips, not N (moto behind a 20 ms proxy: six children 140 ->
# 31 ms; 200 children 4.9 -> 2.3 s, moto answering few at once on this machine's two cores).
_LOOKS = ThreadPoolExecutor(16, thread_name_prefix="zarrfs-children")


def could_be_node(name: str) -> bool:
    """Whether looking `name` up in a group is worth a request: not hidden (metadata files,
    `.git`, `.Trash`, editors' `.name.swp`), not reserved (v3: `__` prefixes, `zarr.json`), not
    a temporary (`name~`, `#name#`, `name.swp`)."""
    if not name or "/" in name or name == METADATA_KEY:
        return False
    if name.startswith((".", "__", "#")):
        return False
    return not name.endswith(_TEMPORARY_SUFFIXES)


class GroupChildren:
    """The children of one group, learnt as they are asked for. Thread-safe; what is asked of
    the store happens under this group's own lock, so it is asked once."""

    def __init__(self, node: NodeMetadata, get: Get, list_dirs: ListDirs, *,
                 declared: Iterable[str] = (), skipped: dict[str, str] | None = None,
                 clock: Clock = time.monotonic) -> None:
        """`declared`: names below the group that OME-Zarr metadata gives (`declared_below`);
        `skipped`: where children whose metadata cannot be read are put, with the reason."""
        self.node = node
        self._get = get
        self._list_dirs = list_dirs
        self._declared = [name for name in declared if could_be_node(name)]
        self._skipped = skipped
        self._clock = clock
        self._lock = threading.Lock()
        self._misses: dict[str, float] = {}  # name -> until when it is taken as missing
        self._relist_at: float | None = None  # when a failed or empty listing may be retried
        self._told = False  # (that the group cannot be listed: logged once)
        consolidated = consolidated_children(node)
        self._known: dict[str, NodeMetadata] = consolidated or {}
        self._complete = consolidated is not None  # every child is known

    def all(self) -> dict[str, NodeMetadata]:
        """Every child known, after listing the group (again, once a failed listing is old)."""
        with self._lock:
            if not self._complete and self._due(self._relist_at):
                self._learn()
            return dict(self._known)

    def find(self, name: str) -> NodeMetadata | None:
        """The child `name`: known, or probed (a miss is remembered for a while)."""
        with self._lock:
            if name in self._known or self._complete or not could_be_node(name):
                return self._known.get(name)
            return self._probe(name)

    def add(self, child: NodeMetadata) -> None:
        """A child this mount created (or moved here)."""
        with self._lock:
            self._known[child.name] = child
            self._misses.pop(child.name, None)

    def remove(self, name: str) -> None:
        """A child this mount deleted (or moved away)."""
        with self._lock:
            self._known.pop(name, None)

    @property
    def complete(self) -> bool:
        """Whether every child is known (consolidated metadata, or a listing that found some)."""
        with self._lock:
            return self._complete

    def known(self) -> dict[str, NodeMetadata]:
        """The children known now, learning nothing."""
        with self._lock:
            return dict(self._known)

    def discovered(self, name: str) -> NodeMetadata | None:
        """What is stored at child `name` now, asked of the store (no lock held)."""
        return self._discovered(name, child_formats(self.node))

    def _learn(self) -> None:
        listed = self._listed()
        new = [name for name in listed if not name.startswith(".") and name not in self._known]
        found = _LOOKS.map(lambda name: self._discovered(name, ALL_FORMATS), new)
        for name, child in zip(new, found, strict=True):
            if child is not None:
                self._known[name] = child
        if listed:
            self._complete = True
            return
        self._relist_at = self._clock() + MISS_SECONDS
        for name in self._declared:
            if name not in self._known:
                self._probe(name)

    def _listed(self) -> Sequence[str]:
        try:
            return self._list_dirs(self.node.path)
        except ZarrfsError as e:
            if not self._told:
                log.info("group %s cannot be listed (%s): showing the children its metadata names "
                         "and those looked up by name", self.node.path or "/", e)
                self._told = True
            return ()

    def _probe(self, name: str) -> NodeMetadata | None:
        if not self._due(self._misses.get(name)):
            return None
        child = self._discovered(name, child_formats(self.node))
        if child is None:
            self._misses[name] = self._clock() + MISS_SECONDS
            return None
        self._misses.pop(name, None)
        self._known[name] = child
        return child

    def _discovered(self, name: str, formats: tuple[int, ...]) -> NodeMetadata | None:
        path = join_path(self.node.path, name)
        try:
            return discover(self._get, path, formats, consolidated_first=False)
        except (MetadataError, RefusedKey) as e:  # (one child's: the others are listed)
            log.warning("%s: skipped: %s", path, e)
            if self._skipped is not None:
                self._skipped[path] = str(e)
            return None

    def _due(self, until: float | None) -> bool:
        return until is None or self._clock() >= until


def children_of(node: NodeMetadata, get: Get, list_dirs: ListDirs,
                skipped: dict[str, str] | None = None) -> dict[str, NodeMetadata]:
    """A group's children (see the module's docstring), its own OME-Zarr metadata naming those
    a listing cannot. A child whose metadata cannot be read is logged, and put in `skipped`
    with the reason."""
    declared = declared_below(node.path, lambda path: node.attributes if path == node.path else None)
    return GroupChildren(node, get, list_dirs, declared=declared, skipped=skipped).all()

