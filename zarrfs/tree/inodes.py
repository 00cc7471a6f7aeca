"""Names of the nodes a mount serves, and their inode numbers.

A node is named by a `Ref`: the store path of its group or array, its role, and for metadata,
header and chunk files the name parts below it. Inode numbers are a hash of the Ref, so they
depend on the node's path and role only (never on an array's shape) and are the same in every
mount. The table from inode back to Ref holds what the kernel holds (lookup counts, `forget`).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass

log = logging.getLogger(__name__)

GROUP, ARRAY, METADATA, DATA, HEADER, CHUNKS, CHUNK = (
    "group", "array", "metadata", "data", "header", "chunks", "chunk")
UPLOAD = "upload"  # a .npy file being written into a group (`uploads`)
GROUP_VIEW = "group view"  # a file of a group directory showing the whole group (`group_views`)
VERSION_DIR, VERSION_LOG = "versions", "version log"  # `.versions/`, its kinds and `log` (`versions`)
ROOT_INODE = 1


@dataclass(frozen=True)
class Ref:
    path: str  # the group or array it belongs to ("" for the root)
    role: str
    parts: tuple[str, ...] = ()  # a metadata or header file's name; key parts below chunks/

    @property
    def is_dir(self) -> bool:
        return self.role in (GROUP, ARRAY, CHUNKS, VERSION_DIR)

    def describe(self) -> str:
        names = ("chunks", *self.parts) if self.role in (CHUNKS, CHUNK) else self.parts
        if self.role == DATA:
            names = ("data",)
        return "/".join(p for p in (self.path, *names) if p) or "/"


def inode_of(ref: Ref, root: Ref) -> int:
    if ref == root:
        return ROOT_INODE
    text = "\0".join((ref.path, ref.role, *ref.parts)).encode()
    number = int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") >> 1
    return number if number > ROOT_INODE else number + 2


class InodeTable:
    """Inode -> Ref for the nodes the kernel knows, with the kernel's lookup counts."""

    def __init__(self, root: Ref) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._refs: dict[int, Ref] = {ROOT_INODE: root}
        self._lookups: dict[int, int] = {}

    def remember(self, ref: Ref) -> int:
        number = inode_of(ref, self.root)
        with self._lock:
            known = self._refs.setdefault(number, ref)
            if known != ref:
                log.error("inode collision between %s and %s", known.describe(), ref.describe())
            self._lookups[number] = self._lookups.get(number, 0) + 1
        return number

    def ref(self, inode: int) -> Ref | None:
        with self._lock:
            return self._refs.get(inode)

    def known(self, ref: Ref) -> int | None:
        number = inode_of(ref, self.root)
        with self._lock:
            return number if number in self._refs else None

    def forget(self, inode: int, count: int) -> None:
        with self._lock:
            left = self._lookups.get(inode, 0) - count
            if left > 0:
                self._lookups[inode] = left
            elif inode != ROOT_INODE:
                self._lookups.pop(inode, None)
                self._refs.pop(inode, None)

    def refs_below(self, path: str) -> Iterator[tuple[int, Ref]]:
        """The known nodes of the group or array at `path` (not of its children)."""
        with self._lock:
            found = [(n, r) for n, r in self._refs.items() if r.path == path]
        yield from found
