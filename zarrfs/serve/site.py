"""The tree as the server reaches it: a URL path to a node, the node's files, their
validators (`validators`) and content types, close-to-open with other writers (`reading`
says which request is an open), and every change made through the server.

The tree knows no HTTP and no FUSE. As the mount does, the server shows what the tree shows:
a path is looked up name by name from the root (a name the tree does not know is asked of the
store once, `recheck=open`, as a mount's lookup that misses is), so nothing outside the tree
can be named. Requests are answered in the server's threads, each calling the tree as the
mount's worker threads do.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import TypeVar

from ..options import TreeOptions
from ..tree import GROUP, Ref, Tree, in_versions
from ..views import FileView
from .reserved import Reservations
from .side_files import SideFiles
from .validators import Validators, source_of

T = TypeVar("T")

# Content types by the end of a file's name (the views' own), the rest raw bytes.
CONTENT_TYPES = (
    (".ome.tif", "image/tiff"), (".tif", "image/tiff"), (".h5", "application/x-hdf5"),
    (".nc", "application/x-netcdf"), (".npy", "application/x-npy"), (".fits", "application/fits"),
    (".nii", "application/x-nifti"), (".mrc", "application/octet-stream"),
    (".json", "application/json"), (".zarray", "application/json"), (".zgroup", "application/json"),
    (".zattrs", "application/json"), (".zmetadata", "application/json"), (".vrt", "application/xml"),
    (".nhdr", "text/plain; charset=utf-8"), (".mhd", "text/plain; charset=utf-8"),
    (".txt", "text/plain; charset=utf-8"),
)


def content_type(name: str) -> str:
    return next((kind for end, kind in CONTENT_TYPES if name.endswith(end)), "application/octet-stream")


def url_names(path: str) -> list[str]:
    """The names of a URL path below the server's root ("/a/b/" -> ["a", "b"])."""
    return [name for name in path.split("/") if name]


class Site:
    """What the server's resources read and change of the tree (`resources`)."""

    def __init__(self, tree: Tree, options: TreeOptions, *, read_only: bool) -> None:
        self.tree = tree
        self.options = options
        self.read_only = read_only or options.read_only
        self.started = time.time()
        self.validators = Validators(tree)
        self._lock = threading.Lock()
        self._writing: dict[Hashable, threading.Lock] = {}
        self.side_files = SideFiles()
        self.reservations = Reservations()
        # Where a PUT's body is staged past its bound in memory (`staging`): beside the disk
        # cache when there is one (None: the system's temporary directory).
        self.staging = options.disk_cache

    # -- names -------------------------------------------------------------------------------

    def resolve(self, path: str) -> Ref | None:
        """The node a URL path names, or None (no such name in the tree)."""
        ref = self.tree.root
        for name in url_names(path):
            if not ref.is_dir:
                return None
            found = self.tree.lookup(ref, name)
            if found is None and not name.startswith(".") and self._recheck_group(ref):
                found = self.tree.lookup(ref, name)  # (another writer made it since)
            if found is None:
                return None
            ref = found
        return ref

    def names(self, directory: Ref) -> Sequence[str]:
        if directory.role == GROUP:
            self._recheck_group(directory)
        return self.tree.names(directory)

    def file(self, ref: Ref) -> FileView:
        return self.tree.file(ref)

    def writable(self, ref: Ref) -> bool:
        return not self.read_only and not in_versions(ref)

    # -- other writers ------------------------------------------------------------------------

    def forget_stale(self) -> None:
        """What the tree queued for a kernel's caches after a change is dropped (the server
        keeps none: its validators follow the files' versions)."""
        self.tree.take_stale()

    def fresh(self, ref: Ref) -> None:
        """Close-to-open (`recheck=open`, as a mount's open): what another writer changed
        of the file `ref` is taken before it is served."""
        if self.options.recheck is None:
            return
        if self.tree.store.outage.ask(lambda: self.tree.recheck(ref), ref.describe()):
            self.validators.found_changed(ref)
            self.forget_stale()

    def _recheck_group(self, group: Ref) -> bool:
        if self.options.recheck is None or group.role != GROUP or not self.tree.groups.due(group.path):
            return False
        changed = self.tree.store.outage.ask(lambda: self.tree.groups.recheck(group.path), group.describe())
        if changed:
            self.forget_stale()
        return changed

    # -- changes -------------------------------------------------------------------------------

    def writing(self, ref: Ref) -> threading.Lock:
        """The lock a writer of the file `ref` holds: one for all the files of an array, which
        are its bytes (`validators.source_of`), so writes to them are made in turn."""
        with self._lock:
            return self._writing.setdefault(source_of(ref), threading.Lock())

    def edit(self, change: Callable[..., T], *args: object) -> T:
        """A change of the tree (a group made, a node deleted or moved)."""
        try:
            return change(*args)
        finally:
            self.forget_stale()

    def walk(self, directory: Ref, names: Sequence[str]) -> Iterator[tuple[str, Ref]]:
        """The entries of a directory the tree still shows, one at a time (a listing of a
        million chunk files is never held)."""
        for name in names:
            child = self.tree.lookup(directory, name)
            if child is not None:
                yield name, child
