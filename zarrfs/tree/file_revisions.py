"""What each file's bytes depend on, as a revision that changes whenever they may have: the
server's ETags (`zarrfs serve`) are made of it, so a client's cached bytes are valid exactly
while it holds.

- A metadata file (and `.versions/log`): its bytes, digested.
- An array's files (`data`, its views, its chunk files): the array as opened (its number in
  the cache, a new one when it is opened again), its `changes` (every element written here,
  every object stored, every change of another writer's a recheck or a read found: the array
  layer's `Seen`), and its node's metadata (shape, attributes). An array of strings: the
  object holding it, and its node's metadata (it is read only).
- A group's files showing its arrays (`data.nc`, `data.h5`, a pyramid's TIFF): the group's
  metadata, and that of every node down to each array shown, with each opened array's
  revision.
- A `.npy` being written: the upload and the writes it took.
- Anything else: a new revision at each ask (never cached).

Nothing here reads the store: an array is never opened to say its revision (one not opened
has its node's metadata alone), and a metadata file's bytes are what the file holds already.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
from collections.abc import Hashable
from typing import Any, Protocol

from ..formats import NodeMetadata
from ..views import FileView
from .inodes import CHUNK, DATA, GROUP_VIEW, HEADER, METADATA, UPLOAD, VERSION_LOG, Ref
from .uploads import Upload

KEPT = 1 << 16  # nodes and objects whose digests and numbers are remembered (then made again)


class Files(Protocol):
    """What revisions are read from (`Tree`)."""

    def node(self, path: str) -> NodeMetadata | None: ...
    def file(self, ref: Ref) -> FileView: ...
    def opened_array(self, path: str) -> Any: ...
    def strings_of(self, path: str) -> object | None: ...
    def shown_arrays(self, ref: Ref) -> list[str]: ...


class FileRevisions:
    def __init__(self, files: Files) -> None:
        self._files = files
        self._lock = threading.Lock()
        self._digests: dict[str, tuple[NodeMetadata, str]] = {}  # path -> (node, its digest)
        self._numbers: dict[str, tuple[object, int]] = {}  # path -> (an array of strings, its number)
        self._count = itertools.count()

    def of(self, ref: Ref) -> Hashable:
        """The revision of the file `ref` now (FileNotFoundError: it is gone)."""
        if ref.role in (METADATA, VERSION_LOG):
            view = self._files.file(ref)
            return "bytes", hashlib.blake2b(bytes(view.read(0, view.size)), digest_size=16).hexdigest()
        if ref.role == GROUP_VIEW:
            shown = self._files.shown_arrays(ref)
            below = sorted({p for path in shown for p in _between(ref.path, path)})
            return "group", self._node(ref.path), tuple((p, self._node(p)) for p in below), \
                tuple(self._array(path) for path in shown)
        if ref.role in (DATA, HEADER, CHUNK):
            return self._array(ref.path)
        if ref.role == UPLOAD:  # (davfs2 LOCKs a new name, then PUTs with If-Match its HEAD's ETag)
            upload = self._files.file(ref)
            return ("upload", *upload.version) if isinstance(upload, Upload) else ("once", next(self._count))
        return "once", next(self._count)

    def _array(self, path: str) -> Hashable:
        array = self._files.opened_array(path)
        if array is not None:
            return "array", path, self._node(path), array.owner, array.changes
        strings = self._files.strings_of(path)
        return "strings", path, self._node(path), None if strings is None else self._number(path, strings)

    def _node(self, path: str) -> str | None:
        """A digest of the node's metadata (its documents and bytes), once per node object
        (the tree replaces a node whole when it changes)."""
        node = self._files.node(path)
        if node is None:
            return None
        with self._lock:
            known = self._digests.get(path)
        if known is not None and known[0] is node:
            return known[1]
        text = json.dumps([node.kind, node.documents, sorted(node.raw.items())], sort_keys=True, default=repr)
        digest = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
        with self._lock:
            if len(self._digests) >= KEPT:
                self._digests.clear()
            self._digests[path] = (node, digest)
        return digest

    def _number(self, path: str, thing: object) -> int:
        """A number of `thing` at `path`, new for another object (a node opened again)."""
        with self._lock:
            known = self._numbers.get(path)
            if known is not None and known[0] is thing:
                return known[1]
            if len(self._numbers) >= KEPT:
                self._numbers.clear()
            number = next(self._count)
            self._numbers[path] = (thing, number)
            return number


def _between(group: str, path: str) -> list[str]:
    """The paths of the nodes between `group` and `path` (both excluded)."""
    parts = path.split("/")
    first = len(group.split("/")) if group else 0
    return ["/".join(parts[:depth]) for depth in range(first + 1, len(parts))]
