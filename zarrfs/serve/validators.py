"""A file's ETag and Last-Modified: per revision of the file (`tree.file_revisions`), so a
write to one array, or another writer's change to it, gives new ones to that array's files
only, and a client's If-None-Match and If-Range hold exactly while its bytes are the file's.

An ETag is the server's (a restarted server gives others), the file's revision and its
size. Last-Modified is when the server first saw the revision it has now of what the file
shows (the array, for its files); where it does not remember (a first sight, or forgotten
among too many), now: never earlier than a change.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable

from ..tree import CHUNK, DATA, HEADER, Ref, Tree
from ..views import FileView

SINCE_KEPT = 4096  # sources whose revision's first sight is remembered


def source_of(ref: Ref) -> Hashable:
    """What a file shows, of which its revision is: an array's files show the array."""
    return ("array", ref.path) if ref.role in (DATA, HEADER, CHUNK) else ref


class Validators:
    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self._tag = secrets.token_hex(4)
        self._lock = threading.Lock()
        self._found_changed: dict[Hashable, int] = {}  # source -> rechecks that said it changed
        self._since: OrderedDict[Hashable, tuple[str, float]] = OrderedDict()  # source -> (revision, seen)

    def of(self, ref: Ref, view: FileView) -> tuple[str, float]:
        """The file's ETag and Last-Modified (seconds since the epoch)."""
        source = source_of(ref)
        revision = self.tree.file_revisions.of(ref)
        with self._lock:
            found = (revision, self._found_changed.get(source, 0))
            digest = hashlib.blake2b(repr(found).encode(), digest_size=8).hexdigest()
            known = self._since.get(source)
            since = known[1] if known is not None and known[0] == digest else \
                max(time.time(), known[1] if known is not None else 0.0)
            self._since[source] = (digest, since)
            self._since.move_to_end(source)
            if len(self._since) > SINCE_KEPT:
                self._since.popitem(last=False)
        return f"{self._tag}-{digest}-{view.size}", since

    def found_changed(self, ref: Ref) -> None:
        """A recheck said another writer changed what the file shows: new validators, even
        where the revision cannot tell (an array that read more objects than it remembers)."""
        source = source_of(ref)
        with self._lock:
            self._found_changed[source] = self._found_changed.get(source, 0) + 1
