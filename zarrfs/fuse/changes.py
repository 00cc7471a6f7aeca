"""The requests that change the tree: `mkdir` (a group), `rm -r` and `rmdir` (delete a group
or array), `mv` (move one), `setfattr -n user.zarr.attributes` (replace its attributes). They
are translated here; the tree's `edits` make the change. `create` of `NAME.npy` in a group
makes the array NAME from the .npy stream written (`tree.uploads`). With `recheck=open`,
`opendir` of a group and a lookup that misses ask the store what other writers added to or
deleted from it (`tree.group_recheck`, at most once a second per group, bounded).

`rm -r DIR` unlinks every file below DIR, removes its subdirectories, then DIR. The files of
an array or group (metadata, `data`, headers, chunk files) cannot be deleted one by one, so an
unlink of one is accepted only while a directory of that node is open (as `rm -r` holds it while
it empties it) and changes nothing: the node is marked, and the `rmdir` of its directory that
follows within `MARK_SECONDS` deletes the whole node. `rm MNT/a/data` alone is EPERM; `rmdir`
of an unmarked array is ENOTEMPTY; of a group, it succeeds once the group has no children.
"""

from __future__ import annotations

import errno
import json
import stat
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import pyfuse3

from ..options import MountOptions
from ..tree import (
    ARRAY,
    CHUNK,
    CHUNKS,
    DATA,
    GROUP,
    GROUP_VIEW,
    HEADER,
    METADATA,
    Ref,
    Tree,
    in_versions,
    takes_new_versions,
)
from ..views.xattrs import PREFIX as XATTR_PREFIX
from .boundary import CounterSink, Timings, boundary
from .freshness import KernelFreshness
from .modes import GivenModes
from .names import name_text
from .workers import Workers

T = TypeVar("T")
ATTRIBUTES_XATTR = XATTR_PREFIX + "attributes"
MARK_SECONDS = 30.0  # how long an accepted unlink waits for the rmdir of its directory
NODE_FILES = (METADATA, DATA, HEADER, CHUNK, GROUP_VIEW)


class Removals:
    """Which node directories are open (`opendir`), and which nodes `rm -r` is emptying."""

    def __init__(self) -> None:
        self._open: Counter[int] = Counter()
        self._paths: dict[int, str] = {}
        self._marked: dict[str, float] = {}

    def opened(self, inode: int, path: str) -> None:
        self._open[inode] += 1
        self._paths[inode] = path

    def released(self, inode: int) -> None:
        self._open[inode] -= 1
        if self._open[inode] <= 0:
            del self._open[inode]
            self._paths.pop(inode, None)

    def is_open(self, path: str) -> bool:
        return path in self._paths.values()

    def mark(self, path: str) -> None:
        self._marked[path] = time.monotonic() + MARK_SECONDS

    def take_mark(self, path: str) -> bool:
        return self._marked.pop(path, 0.0) > time.monotonic()


class ChangeOperations:
    """The handlers of `ZarrOperations` that change the tree (a mixin: `ZarrOperations` sets
    the attributes declared here)."""

    tree: Tree
    options: MountOptions
    counters: CounterSink
    timings: Timings | None
    workers: Workers
    fresh: KernelFreshness
    read_only: bool
    removals: Removals
    modes: GivenModes

    # Implemented by ZarrOperations and FileOperations (`_open_new`: a handle on a file just
    # made, open for writing): declared, not defined, so that the order of the mixins cannot
    # put a stub in front of an implementation.
    _node: Callable[[int], Ref]
    _lookup: Callable[[Ref, str], pyfuse3.EntryAttributes]
    _attributes: Callable[..., pyfuse3.EntryAttributes]
    _open_new: Callable[[Ref, int], pyfuse3.FileInfo]

    # -- open directories (what `rm -r` holds) ---------------------------------------------

    @boundary
    async def opendir(self, inode: int, ctx: Any) -> int:
        node = self._node(inode)
        if not node.is_dir:
            raise pyfuse3.FUSEError(errno.ENOTDIR)
        self.removals.opened(inode, node.path)
        await self.recheck_group(node)  # (`ls`: other writers' new and deleted nodes)
        return inode

    async def look_up(self, parent: Ref, name: str) -> pyfuse3.EntryAttributes:
        try:
            return await self.workers.run(self._lookup, parent, name)
        except pyfuse3.FUSEError as e:  # another writer may have made it since: ask (bounded)
            if e.errno != errno.ENOENT or name.startswith(".") or not await self.recheck_group(parent):
                raise
        return await self.workers.run(self._lookup, parent, name)

    async def upload_closed(self, upload: Ref, *, released: bool = True) -> None:
        """A `NAME.npy` written was closed: after its last opener, only the array NAME remains
        (`released` False: a flush, which close(2) waits for, unlike the release)."""
        self.tree.upload_closed(upload, released=released)
        await self.fresh.invalidate_stale()

    async def recheck_group(self, group: Ref) -> bool:
        """`recheck=open`: what another writer added to or deleted from a group, at most once
        a second per group, within the recheck bound (`tree.group_recheck`); whether it changed."""
        if self.options.recheck is None or group.role != GROUP or not self.tree.groups.due(group.path):
            return False
        changed = await self.fresh.ask_store(group, lambda: self.tree.groups.recheck(group.path))
        if changed:
            await self.fresh.invalidate_stale()
            self.fresh.touch()
        return changed

    @boundary
    async def releasedir(self, fh: int) -> None:
        self.removals.released(fh)

    # -- changes -----------------------------------------------------------------------------

    @boundary
    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: Any) -> pyfuse3.EntryAttributes:
        parent = self._node(parent_inode)
        version = takes_new_versions(parent)  # (.versions/tags, .versions/branches: a tag or branch)
        if not version:
            parent = self._writable_group(parent_inode)
        elif self.read_only:
            raise pyfuse3.FUSEError(errno.EROFS)
        text = name_text(name)
        await self._edit(self.tree.edits.create_group, parent.path, text)
        attributes = await self.workers.run(self._lookup, parent, text)
        if not version:  # (a group's mode is kept for the mount's life: `modes`)
            self.modes.give(attributes.st_ino, mode & ~ctx.umask)
            self.modes.shown(attributes)
        return attributes

    @boundary
    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: Any
                     ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        """`NAME.npy` in a group: the array NAME, made from the .npy stream written (`tree.uploads`)."""
        ref = await self._new_npy(parent_inode, name, mode, openers=1)
        attributes = await self.workers.run(self._remembered, ref)
        return self._open_new(ref, attributes.st_ino), attributes

    @boundary
    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: Any
                    ) -> pyfuse3.EntryAttributes:
        ref = await self._new_npy(parent_inode, name, mode, openers=0)
        return await self.workers.run(self._remembered, ref)

    async def _new_npy(self, parent_inode: int, name: bytes, mode: int, openers: int) -> Ref:
        parent = self._writable_group(parent_inode)
        if not stat.S_ISREG(mode):
            raise pyfuse3.FUSEError(errno.EPERM)
        return await self._edit(self.tree.begin_upload, parent.path, name_text(name), openers)

    def _remembered(self, ref: Ref) -> pyfuse3.EntryAttributes:
        attributes = self._attributes(ref)
        self.tree.inodes.remember(ref)
        return attributes

    @boundary
    async def unlink(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        child = await self._child(parent_inode, name)
        if child.role not in NODE_FILES or not self.removals.is_open(child.path):
            raise pyfuse3.FUSEError(errno.EPERM)
        self.removals.mark(child.path)  # (deleted with its directory: see the module)

    @boundary
    async def rmdir(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        child = await self._child(parent_inode, name)
        if child.role == CHUNKS:
            if not self.removals.is_open(child.path):
                raise pyfuse3.FUSEError(errno.EPERM)
            self.removals.mark(child.path)
            return
        if child.role not in (GROUP, ARRAY):
            raise pyfuse3.FUSEError(errno.ENOTDIR)
        if child.role == ARRAY and not self.removals.take_mark(child.path):
            raise pyfuse3.FUSEError(errno.ENOTEMPTY)
        await self._edit(self.tree.edits.delete, child.path, child.role == ARRAY)

    @boundary
    async def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int, name_new: bytes,
                     flags: int, ctx: Any) -> None:
        """As rename(2) of a directory: onto an empty group it replaces it; onto a non-empty
        group or an array ENOTEMPTY, onto a file ENOTDIR (`edits.move`)."""
        new_name = name_text(name_new)  # (checked before any store request)
        child = await self._child(parent_inode_old, name_old)
        parent = self._writable_group(parent_inode_new)
        if child.role not in (GROUP, ARRAY):
            raise pyfuse3.FUSEError(errno.EPERM)
        if flags & ~pyfuse3.RENAME_NOREPLACE:
            raise pyfuse3.FUSEError(errno.EINVAL)
        target = await self.workers.run(self.tree.lookup, parent, new_name)
        if target is not None and target != child and flags & pyfuse3.RENAME_NOREPLACE:
            raise pyfuse3.FUSEError(errno.EEXIST)
        if target is not None and not target.is_dir:
            raise pyfuse3.FUSEError(errno.ENOTDIR)
        await self._edit(self.tree.edits.move, child.path, parent.path, new_name)
        # The kernel moves its entry, inode and all (the table names the new path by it): its
        # entries below are looked up again, as the tree learns the moved nodes by lookups.
        pyfuse3.invalidate_entry_async(parent_inode_new, name_new, ignore_enoent=True)

    @boundary
    async def setxattr(self, inode: int, name: bytes, value: bytes, ctx: Any) -> None:
        node = self._node(inode)
        if self.read_only or in_versions(node):
            raise pyfuse3.FUSEError(errno.EROFS)
        if name.decode("utf-8", "replace") != ATTRIBUTES_XATTR or node.role not in (GROUP, ARRAY):
            raise pyfuse3.FUSEError(errno.EPERM)
        try:
            attributes = json.loads(value)
        except (UnicodeDecodeError, ValueError):
            raise pyfuse3.FUSEError(errno.EINVAL) from None
        if not isinstance(attributes, dict):
            raise pyfuse3.FUSEError(errno.EINVAL)
        await self._edit(self.tree.edits.set_attributes, node.path, attributes)

    @boundary
    async def removexattr(self, inode: int, name: bytes, ctx: Any) -> None:
        fixed = self.read_only or in_versions(self._node(inode))
        raise pyfuse3.FUSEError(errno.EROFS if fixed else errno.EPERM)

    # -- helpers -------------------------------------------------------------------------

    async def _edit(self, change: Callable[..., T], *args: Any) -> T:
        try:
            return await self.workers.run(change, *args)
        finally:
            await self.fresh.invalidate_stale()
            self.fresh.touch()

    async def _child(self, parent_inode: int, name: bytes) -> Ref:
        """The node `name` names in a directory of a writable mount."""
        parent = self._node(parent_inode)
        if self.read_only or in_versions(parent):
            raise pyfuse3.FUSEError(errno.EROFS)
        child = await self.workers.run(self.tree.lookup, parent, name_text(name))
        if child is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return child

    def _writable_group(self, inode: int) -> Ref:
        node = self._node(inode)
        if self.read_only or in_versions(node):
            raise pyfuse3.FUSEError(errno.EROFS)
        if node.role != GROUP:
            raise pyfuse3.FUSEError(errno.EPERM)
        return node
