"""The pyfuse3 operations of a mount: answered from the node tree and its file views.

Requests are answered from `views`; anything that decodes, encodes, copies large buffers or
touches the store runs in a worker thread under a limiter, so the trio loop keeps serving.
Errors become errno values in exactly one place (`boundary.errno_for`). Over a remote store
every wait has a deadline (`workers`).
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import signal
import stat
from collections.abc import Callable, Sequence
from typing import Any

import pyfuse3
import trio

from ..errors import ResizeError
from ..options import CHECK_SECONDS, STATS_XATTR, MountOptions
from ..tree import UPLOAD, Ref, Tree, directory_links, in_versions, takes_new_versions
from ..views import FileView
from ..views.files import STREAM_BLOCK, FixedBytesError
from ..views.xattrs import PREFIX as XATTR_PREFIX
from .boundary import Timings, boundary
from .changes import ChangeOperations, Removals
from .file_ops import FileOperations, Handle
from .freshness import KernelFreshness, WriteOrder
from .kernel import store_pages
from .modes import GivenModes
from .names import name_text
from .pages import Pages
from .room import statvfs_data
from .times import GivenTimes
from .workers import Workers

log = logging.getLogger(__name__)

ATTRIBUTE_TIMEOUT = 60.0  # sizes and names never change while mounted
# Threads pushing slabs into the page cache (-o push_pages): measured on 2 cores, two pushed
# 879-947 MB/s where one pushed 648-686 (docs/performance.md, "Pages pushed").
PUSHERS = 2
READDIR_BATCH = 32


# (pyfuse3 declares `read` as returning bytes; any contiguous buffer is taken: see FileOperations.read)
class ZarrOperations(FileOperations, ChangeOperations, pyfuse3.Operations):  # type: ignore[misc]
    """The handlers pyfuse3 calls, one a kernel request: its one user is the kernel, whose
    requests name them, and they are split already by what they do (this module: lookups,
    attributes, listings; `file_ops`: opens, reads, writes; `changes`: mkdir, rm, mv and
    attributes), so it is left whole."""

    supports_dot_lookup = False
    enable_writeback_cache = False

    def __init__(self, tree: Tree, options: MountOptions, *, read_only: bool,
                 timeout: float | None = None,
                 room: Callable[[], os.statvfs_result | None] = lambda: None,
                 timings: Timings | None = None,
                 silence: Callable[[], float] = lambda: math.inf) -> None:
        """`timeout`: the store's deadline, the longest a request waits while the store is
        silent (None: no bound, a local store); `silence`: how long it has been (`Workers`).
        `room`: what the store's own filesystem has room for (None: a remote store: see
        `room`). `timings`: where each request's latency goes (metrics)."""
        super().__init__()
        self.tree = tree
        tree.new_arrays.codec, tree.new_arrays.chunks = options.new_codec, options.new_chunks
        self._room = room
        self.counters = tree.shared.counters
        self.timings = timings
        self.options = options
        self.read_only = options.read_only or read_only
        self.workers = Workers(timeout, lambda: self.counters.add(timeouts=1), silence)
        self.removals = Removals()
        self.times = GivenTimes()
        self.modes = GivenModes(options.umask)
        self._handles: dict[int, Handle] = {}
        self._next_fh = 1
        self._nursery: trio.Nursery | None = None
        self.order = WriteOrder()
        self.pages = Pages(store_pages, PUSHERS, lambda n: self.counters.add(bytes_pushed=n)) \
            if options.push_pages else None
        recheck_bound = None if timeout is None else min(CHECK_SECONDS, timeout)
        self.fresh = KernelFreshness(tree, self.workers.run, lambda: list(self._handles.values()),
                                     self._serving, self.order.writing, recheck_bound=recheck_bound,
                                     pages=self.pages)

    # -- serving ---------------------------------------------------------------------------

    async def serve(self, mountpoint: str, on_serving: Callable[[], None]) -> None:
        """Run until unmounted or asked to stop by SIGTERM/SIGINT.

        `on_serving` runs (in a thread) once the kernel has finished its handshake with us and
        the mount answers, which is when kernel settings such as readahead stick."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._watch_signals)
            nursery.start_soon(self._announce, mountpoint, on_serving)
            nursery.start_soon(self.workers.keep_deadlines)
            if self.options.recheck:
                nursery.start_soon(self.fresh.recheck_open_files, self.options.recheck)
            try:
                await pyfuse3.main(min_tasks=2, max_tasks=64)
            finally:
                await self._stop_pushing()  # (unmounted: what is in flight fails at once)
            nursery.cancel_scope.cancel()

    async def _stop_pushing(self) -> None:
        if self.pages is not None:
            await trio.to_thread.run_sync(self.pages.stop)

    async def _announce(self, mountpoint: str, on_serving: Callable[[], None]) -> None:
        try:
            await trio.to_thread.run_sync(os.stat, mountpoint)
        except OSError as e:
            log.warning("the new mount did not answer a stat: %s", e)
        await trio.to_thread.run_sync(on_serving)

    async def _watch_signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                log.info("received %s: flushing and unmounting", signal.Signals(signum).name)
                # A page drop in flight may wait for a request not yet read: let it finish
                # while requests are still read, or the daemon could never exit.
                await self.fresh.stop_dropping()
                await self._stop_pushing()  # (and pushes: theirs too)
                pyfuse3.terminate()

    def _serving(self) -> trio.Nursery:
        assert self._nursery is not None, "requests are answered only while serving"
        return self._nursery

    # -- names and attributes --------------------------------------------------------------

    def _node(self, inode: int) -> Ref:
        node = self.tree.inodes.ref(inode)
        if node is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return node

    def _attributes(self, node: Ref, inode: int | None = None) -> pyfuse3.EntryAttributes:
        attrs = pyfuse3.EntryAttributes()
        attrs.st_ino = self.tree.inode(node) if inode is None else inode
        umask = self.options.umask
        if node.is_dir:
            fixed = self.read_only or (in_versions(node) and not takes_new_versions(node))
            attrs.st_mode = stat.S_IFDIR | ((0o555 if fixed else 0o755) & ~umask)
            attrs.st_nlink = directory_links(self.tree, node)  # (no store request: 1 if not known)
            attrs.st_size = 0
            attrs.st_blksize = STREAM_BLOCK
        else:
            view = self.tree.file(node)
            writable = view.writable and not self.read_only and not in_versions(node)
            attrs.st_mode = stat.S_IFREG | ((0o644 if writable else 0o444) & ~umask)
            attrs.st_nlink = 1
            attrs.st_size = view.size
            attrs.st_blocks = -(-view.size // 512)
            attrs.st_blksize = view.block_size
        attrs.st_uid = self.options.file_uid
        attrs.st_gid = self.options.file_gid
        attrs.st_atime_ns = attrs.st_mtime_ns = attrs.st_ctime_ns = self.fresh.mtime_ns
        self.times.shown(attrs.st_ino, attrs)
        self.modes.shown(attrs)
        attrs.entry_timeout = attrs.attr_timeout = ATTRIBUTE_TIMEOUT
        return attrs

    def _lookup(self, parent: Ref, name: str) -> pyfuse3.EntryAttributes:
        node = self.tree.lookup(parent, name)
        if node is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        attributes = self._attributes(node)
        self.tree.inodes.remember(node)
        return attributes

    @boundary
    async def lookup(self, parent_inode: int, name: bytes, ctx: Any = None) -> pyfuse3.EntryAttributes:
        # Looking into a group may list the store, and opening an array reads its metadata.
        return await self.look_up(self._node(parent_inode), name_text(name))

    @boundary
    async def getattr(self, inode: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        node = self._node(inode)
        if node.is_dir:
            # No I/O: answered at once. The daemon stats its own root once (_announce); a
            # SIGKILL while that request waits on a worker thread would leave the daemon
            # stuck in the kernel, waiting for an answer it can no longer give.
            return self._attributes(node, inode)
        return await self.workers.run(self._attributes, node, inode)

    @boundary
    async def setattr(
        self,
        inode: int,
        attr: pyfuse3.EntryAttributes,
        fields: pyfuse3.SetattrFields,
        fh: int | None,
        ctx: Any,
    ) -> pyfuse3.EntryAttributes:
        node = self._node(inode)
        changes_owner = fields.update_uid or fields.update_gid
        changes = (fields.update_size or changes_owner or fields.update_mode
                   or fields.update_atime or fields.update_mtime)
        if changes and (self.read_only or in_versions(node)):
            raise pyfuse3.FUSEError(errno.EROFS)
        # (cp -p of NAME.npy: accepted, ignored; a group's mode: kept for the mount's life)
        if (changes_owner or (fields.update_mode and not node.is_dir)) and node.role != UPLOAD:
            raise pyfuse3.FUSEError(errno.EPERM)
        if fields.update_mode and node.is_dir:
            self.modes.give(inode, attr.st_mode)
        if fields.update_size:
            view = await self.workers.run(self.tree.file, node)
            if attr.st_size != view.size:
                await self._resize(node, view, attr.st_size)
                self.times.written(inode)
        self.times.give(inode, attr, fields)  # (kept for the mount's life: `times`)
        return await self.workers.run(self._attributes, node, inode)

    async def _resize(self, node: Ref, view: FileView, size: int) -> None:
        """truncate/ftruncate/O_TRUNC: `data` changes the array's first dimension; every
        other file has the array's size."""
        try:
            await self.workers.run(view.resize, size)
        except (ResizeError, FixedBytesError) as e:
            log.warning("refused to change the size of %s from %d to %d bytes: %s", node.describe(),
                        view.size, size, e)
            raise
        finally:
            await self.fresh.invalidate_stale()
        self.fresh.touch()

    # -- extended attributes ---------------------------------------------------------------

    @boundary
    async def getxattr(self, inode: int, name: bytes, ctx: Any) -> bytes:
        text = name.decode("utf-8", "replace")
        if inode == pyfuse3.ROOT_INODE and text == STATS_XATTR:  # `zarrfs stats MOUNTPOINT`
            return json.dumps(self.tree.shared.stats()).encode()
        # `ls -l` asks every entry for security.* and system.* attributes: answer without
        # opening arrays.
        node = self._node(inode)
        if not text.startswith(XATTR_PREFIX):
            raise pyfuse3.FUSEError(pyfuse3.ENOATTR)
        found = (await self.workers.run(self.tree.xattrs, node)).get(text)  # (may open the array)
        if found is None:
            raise pyfuse3.FUSEError(pyfuse3.ENOATTR)
        return found

    @boundary
    async def listxattr(self, inode: int, ctx: Any) -> Sequence[bytes]:
        return [name.encode() for name in await self.workers.run(self.tree.xattrs, self._node(inode))]

    @boundary
    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        for inode, count in inode_list:
            self.tree.inodes.forget(inode, count)

    @boundary
    async def statfs(self, ctx: Any) -> pyfuse3.StatvfsData:
        return statvfs_data(await self.workers.run(self._room), self.read_only)

    # -- directories -----------------------------------------------------------------------

    @boundary
    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        directory = self._node(fh)
        names = await self.workers.run(self.tree.names, directory)  # (a group's: may list the store)
        start = start_id
        while True:
            # In batches about the size of what the kernel's buffer takes.
            entries, start = await self.workers.run(self._entries, directory, names, start, READDIR_BATCH)
            for position, name, child, attributes in entries:
                if not pyfuse3.readdir_reply(token, name.encode(), attributes, position + 1):
                    return
                self.tree.inodes.remember(child)  # the kernel now holds a lookup of it
            if start < 0:
                return

    def _entries(self, directory: Ref, names: Sequence[str], start: int, most: int
                 ) -> tuple[list[tuple[int, str, Ref, pyfuse3.EntryAttributes]], int]:
        """Up to `most` of a directory's entries `names` from position `start` with their
        attributes (looking a child up may read the store: this runs in a worker), and the
        position to go on from (-1: the end)."""
        end = min(len(names), start + most)
        entries = []
        for position in range(start, end):
            child = self.tree.lookup(directory, names[position])
            if child is not None:
                entries.append((position, names[position], child, self._attributes(child)))
        return entries, (end if end < len(names) else -1)

    # -- everything that would change the tree ---------------------------------------------

    async def _refuse(self, *args: Any) -> Any:
        raise pyfuse3.FUSEError(errno.EROFS if self.read_only else errno.EPERM)

    # Groups and arrays are made, deleted and moved as directories (`changes`), arrays also by
    # writing NAME.npy (`create`), never as these.
    symlink = link = _refuse  # type: ignore[assignment]

    @boundary
    async def access(self, inode: int, mode: int, ctx: Any) -> bool:
        node = self._node(inode)
        if mode & os.W_OK:
            if self.read_only or (in_versions(node) and not takes_new_versions(node)):
                raise pyfuse3.FUSEError(errno.EROFS)
            return node.is_dir or (await self.workers.run(self.tree.file, node)).writable
        return True
