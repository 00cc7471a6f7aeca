"""Names of the nodes a mount serves, and their inode numbers.

A node is named by a `Ref`: the store path of its group or array, its role, and for metadata,
header and chunk files the name parts below it. Inode numbers are a hash of the Ref, so they
depend on the node's path and role only (never on an array's shape) and are the same in every
mount — until a node is moved or deleted through the mount. Then a number must follow the node
(rsync -H, tar, du and Samba match files by inode) and never name another node while the mount
lives, whatever the kernel has forgotten meanwhile: the table keeps the path prefixes renamed or
deleted through this mount with their *identity* (`Identities`), and a node's number is the
hash of its Ref with its path's longest such prefix replaced by that identity. The table from
inode back to Ref holds what the kernel holds (lookup counts, `forget`).
"""

from __future__ import annotations

import hashlib
import itertools
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


def inode_of(ref: Ref, root: Ref, identity: str | None = None) -> int:
    """The number of `ref`, its path standing for `identity` (see `Identities`) if given."""
    if ref == root:
        return ROOT_INODE
    text = "\0".join((ref.path if identity is None else identity, ref.role, *ref.parts)).encode()
    number = int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") >> 1
    return number if number > ROOT_INODE else number + 2


class Identities:
    """Path prefixes renamed or deleted through this mount -> the identity their nodes' numbers
    are hashed from. It grows by one entry per rename and per delete made through the mount (a
    few bytes each, never shrinking while it lives: numbers are never reused); other writers'
    changes are not in it (their nodes keep path-derived numbers). Not thread-safe: `InodeTable`
    holds its lock around every call."""

    def __init__(self) -> None:
        self._of: dict[str, str] = {}
        self._made = itertools.count(1)

    def of(self, path: str) -> str:
        """`path` with its longest renamed or deleted prefix replaced by that prefix's identity."""
        if not self._of:
            return path
        prefix = path
        while True:
            if prefix in self._of:
                return self._of[prefix] + path[len(prefix):]
            if not prefix:
                return path
            prefix = prefix.rpartition("/")[0]

    def moved(self, old: str, new: str) -> None:
        """Nodes at and below `new` are those that were at `old`; `old` names new nodes now."""
        carried = self.of(old)
        self._drop_below(new)
        for path in [p for p in self._of if _below(p, old)]:
            self._of[new + path[len(old):]] = self._of.pop(path)
        self._of[new] = carried
        self._of[old] = self._fresh()

    def deleted(self, path: str) -> None:
        """Nodes made at or below `path` from now on are new nodes."""
        self._drop_below(path)
        self._of[path] = self._fresh()

    def _drop_below(self, path: str) -> None:
        for below in [p for p in self._of if _below(p, path)]:
            del self._of[below]

    def _fresh(self) -> str:
        return f"\0moved:{next(self._made)}"  # (no store path holds NUL: never a real path)


def _below(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


class InodeTable:
    """Inode -> Ref for the nodes the kernel knows, with the kernel's lookup counts."""

    def __init__(self, root: Ref) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._refs: dict[int, Ref] = {ROOT_INODE: root}
        self._lookups: dict[int, int] = {}
        self._identities = Identities()

    def number(self, ref: Ref) -> int:
        """`ref`'s inode number for the mount's life (see the module)."""
        with self._lock:
            return self._number(ref)

    def _number(self, ref: Ref) -> int:
        return inode_of(ref, self.root, self._identities.of(ref.path))

    def moved(self, old: str, new: str) -> None:
        """The node at `old` (and everything below) was moved to `new`: same numbers there."""
        with self._lock:
            self._identities.moved(old, new)
            for number, ref in list(self._refs.items()):
                if _below(ref.path, old):
                    self._refs[number] = Ref(new + ref.path[len(old):], ref.role, ref.parts)

    def deleted(self, path: str) -> None:
        """The node at `path` (and everything below) was deleted: the kernel's inodes of it
        name nothing now (ENOENT), and what is made there later gets new numbers."""
        with self._lock:
            self._identities.deleted(path)
            for number in [n for n, r in self._refs.items() if _below(r.path, path) and n != ROOT_INODE]:
                del self._refs[number]

    def remember(self, ref: Ref) -> int:
        with self._lock:
            number = self._number(ref)
            known = self._refs.setdefault(number, ref)
            if known != ref:
                log.error("inode collision between %s and %s", known.describe(), ref.describe())
            self._lookups[number] = self._lookups.get(number, 0) + 1
        return number

    def ref(self, inode: int) -> Ref | None:
        with self._lock:
            return self._refs.get(inode)

    def known(self, ref: Ref) -> int | None:
        with self._lock:
            number = self._number(ref)
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
