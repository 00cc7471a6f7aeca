"""`.versions/` at the root of a mount whose store has versions (Icechunk): `branches/NAME/`,
`tags/NAME/` and `snapshots/ID/`, each the store's whole hierarchy at that version, and `log`,
the mounted branch's commits. Everything below is read-only but for `mkdir` in `tags/` and
`branches/` (a new tag or branch at the mounted branch's head).

A version directory is a group of the tree like any other, at the path
`.versions/KIND/NAME`: the store serves its keys there (`store.icechunk_versions`). Listing a
kind is one listing of the store's refs; a version's root group is read only when the
directory is entered, so `ls .versions/branches` opens no version.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..errors import EditRefused, ReadOnlyError
from ..formats import NodeMetadata
from ..store.versions import KINDS, LOG, MADE_BY_MKDIR, SNAPSHOTS, VERSIONS, Catalog
from ..views import BytesFile, FileView
from .inodes import GROUP, VERSION_DIR, VERSION_LOG, Ref

log = logging.getLogger(__name__)
NAMES_SECONDS = 1.0  # a listing of a kind's names answers lookups this long
Discover = Callable[[str], NodeMetadata | None]  # a node of the store at a path, or None


def in_versions(ref: Ref) -> bool:
    """Whether `ref` is below `.versions` (read-only, whatever the mount)."""
    return ref.path == VERSIONS or ref.path.startswith(VERSIONS + "/")


def takes_new_versions(ref: Ref) -> bool:
    """`.versions/tags` and `.versions/branches`: `mkdir` there makes a tag or a branch."""
    return ref.role == VERSION_DIR and ref.path in {f"{VERSIONS}/{kind}" for kind in MADE_BY_MKDIR}


def version_root(path: str) -> bool:
    """Whether `path` is the root group of a version (`.versions/KIND/NAME`)."""
    parts = path.split("/")
    return len(parts) == 3 and parts[0] == VERSIONS and parts[1] in KINDS


class Versions:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.top = Ref(VERSIONS, VERSION_DIR)
        self._lock = threading.Lock()
        self._names: dict[str, tuple[float, list[str]]] = {}  # kind -> (when listed, names)
        self._log: bytes | None = None

    def serves(self, ref: Ref) -> bool:
        return ref.role in (VERSION_DIR, VERSION_LOG)

    def names(self, directory: Ref) -> list[str]:
        if directory == self.top:
            return [*KINDS, LOG]
        return self._listed(_kind(directory))

    def lookup(self, directory: Ref, name: str, known: Callable[[str], bool]) -> Ref | None:
        """`name` in a directory of versions; a version is not opened, unless it is a snapshot
        not listed (any id looks up): then `known(path)` reads its root."""
        if directory == self.top:
            if name == LOG:
                return Ref(VERSIONS, VERSION_LOG, (LOG,))
            return Ref(f"{VERSIONS}/{name}", VERSION_DIR) if name in KINDS else None
        kind, path = _kind(directory), f"{directory.path}/{name}"
        if name in self._listed(kind) or (kind == SNAPSHOTS and known(path)):
            return Ref(path, GROUP)
        return None

    def _listed(self, kind: str) -> list[str]:
        """A kind's names, listed at most once per `NAMES_SECONDS` (a `readdir` and the lookups
        of what it read: one listing)."""
        with self._lock:
            listed = self._names.get(kind)
        if listed is not None and time.monotonic() - listed[0] < NAMES_SECONDS:
            return listed[1]
        names = self.catalog.names(kind)
        with self._lock:
            self._names[kind] = (time.monotonic(), names)
        return names

    def create(self, directory: str, name: str) -> None:
        """`mkdir .versions/tags/NAME` or `.versions/branches/NAME`."""
        kind = directory.rpartition("/")[2]
        if directory.partition("/")[0] != VERSIONS or directory.count("/") != 1 or kind not in MADE_BY_MKDIR:
            raise ReadOnlyError(f"{directory}: the versions are read-only")
        try:
            self.catalog.create(kind, name)
        except EditRefused as e:
            log.warning("mkdir %s/%s refused: %s", directory, name, e)
            raise
        with self._lock:
            self._names.pop(kind, None)
        log.info("made %s %s at the mounted branch's head", kind.rstrip("s"), name)

    # -- the log ----------------------------------------------------------------------------

    def file(self, ref: Ref) -> FileView:
        with self._lock:
            known = self._log
        if known is None:
            known = self._read_log()
        return BytesFile(known)

    def recheck(self) -> bool:
        """Whether the log changed since it was last read (it is read again)."""
        with self._lock:
            before = self._log
        return self._read_log() != before

    def _read_log(self) -> bytes:
        text = self.catalog.log()
        with self._lock:
            self._log = text
        return text


def _kind(directory: Ref) -> str:
    kind = directory.path.rpartition("/")[2]
    if kind not in KINDS:
        raise FileNotFoundError(directory.describe())
    return kind
