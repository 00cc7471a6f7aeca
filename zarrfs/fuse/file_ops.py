"""The handlers of open files: open, read, write, flush, fsync and release, and the table of
open handles (a mixin of `ZarrOperations`, which sets the attributes declared here).

Reads of bytes decoded ahead are answered on the loop; everything else that may decode, encode
or touch the store runs on a worker (`workers`). A flush has no deadline as a whole, each store
call inside it does: a partition fails an fsync within the store's timeout, while a large flush
to a slow store that still answers can finish.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pyfuse3

from ..options import MountOptions
from ..tree import UPLOAD, Ref, Tree, in_versions
from ..views import FileView, Reading, Streaming
from .boundary import CounterSink, Timings, boundary
from .freshness import KernelFreshness, WriteOrder
from .pages import Pages
from .times import GivenTimes
from .workers import Workers


@dataclass
class Handle:
    """An open file."""

    node: Ref
    inode: int
    view: FileView
    writable: bool
    page_cached: bool  # (not direct_io)
    readahead: Reading | None  # None: a small file, read at once
    pushed: Streaming | None = None  # (its slabs go into the page cache ahead of the reader)
    wrote: bool = False


class FileOperations:
    """The handlers of open files (a mixin: `ZarrOperations` sets the attributes declared
    here and implements the methods)."""

    tree: Tree
    options: MountOptions
    counters: CounterSink
    timings: Timings | None
    workers: Workers
    fresh: KernelFreshness
    order: WriteOrder
    pages: Pages | None  # (None: -o push_pages=no)
    times: GivenTimes
    read_only: bool
    _handles: dict[int, Handle]
    _next_fh: int

    # Implemented by ZarrOperations and ChangeOperations: declared, not defined, so that the
    # order of the mixins cannot put a stub in front of an implementation.
    _node: Callable[[int], Ref]
    _resize: Callable[[Ref, FileView, int], Awaitable[None]]
    upload_closed: Callable[..., Awaitable[None]]

    @boundary
    async def open(self, inode: int, flags: int, ctx: Any) -> pyfuse3.FileInfo:
        node = self._node(inode)
        if node.is_dir:
            raise pyfuse3.FUSEError(errno.EISDIR)
        view = await self.workers.run(self.tree.file, node)
        writable = (flags & os.O_ACCMODE) != os.O_RDONLY
        if node.role == UPLOAD:
            self.tree.uploads.opened(node.path, node.parts[0], writing=writable)
        if writable and (self.read_only or in_versions(node)):
            raise pyfuse3.FUSEError(errno.EROFS)
        if writable and not view.writable:
            raise pyfuse3.FUSEError(errno.EACCES)
        if writable and self.pages is not None:
            self.pages.refuse(inode)  # (its pages may be written from now on)
            await self.fresh.fence()
        changed = self.options.recheck is not None and await self.fresh.recheck(node)
        if changed:
            view = await self.workers.run(self.tree.file, node)  # (a chunk file may be gone)
        if flags & os.O_TRUNC and view.size:
            await self._resize(node, view, 0)
        fh = self._next_fh
        self._next_fh += 1
        # A write-only opener (dd, cp, tofile) cannot map the file: its writes skip the page
        # cache, one copy fewer (a whole-array write of blosc chunks 12-15% faster).
        direct_io = self.options.direct_io or view.direct_io or (flags & os.O_ACCMODE) == os.O_WRONLY
        readahead = view.readahead()
        pushed = readahead if self.pages is not None and not direct_io and not writable \
            and isinstance(readahead, Streaming) else None
        self._handles[fh] = Handle(node, inode, view, writable, page_cached=not direct_io,
                                    readahead=readahead, pushed=pushed)
        keep_cache = self.fresh.may_keep_pages(inode) and not direct_io and not changed
        return pyfuse3.FileInfo(fh=fh, keep_cache=keep_cache, direct_io=direct_io)

    def _open_new(self, node: Ref, inode: int) -> pyfuse3.FileInfo:
        fh, self._next_fh = self._next_fh, self._next_fh + 1
        view = self.tree.file(node)
        self._handles[fh] = Handle(node, inode, view, True, page_cached=False, readahead=None)
        return pyfuse3.FileInfo(fh=fh, direct_io=True)

    def _handle(self, fh: int) -> Handle:
        handle = self._handles.get(fh)
        if handle is None:
            raise pyfuse3.FUSEError(errno.EBADF)
        return handle

    @boundary
    async def read(self, fh: int, offset: int, size: int) -> bytes | memoryview:
        # pyfuse3 takes any contiguous buffer, so a view of a decoded chunk goes out uncopied.
        handle = self._handle(fh)
        await self.order.wait_for(handle.inode, offset, offset + size)
        ready: bytes | memoryview | None = None
        if handle.readahead is None:  # a small file, whose bytes may still be in the store
            ready = await self.workers.run(handle.view.read, offset, size)
        else:  # (bytes decoded ahead are answered here, without a trip to a worker thread)
            ready = handle.readahead.ready(offset, size)
            if ready is None:
                ready = await self.workers.run(handle.readahead.read, offset, size)
            if handle.pushed is not None and self.pages is not None:
                self.pages.push(handle.inode, handle.pushed)
        self.counters.add(bytes_replied=len(ready))
        return ready

    @boundary
    async def write(self, fh: int, offset: int, buf: bytes) -> int:
        handle = self._handle(fh)
        if self.read_only:
            raise pyfuse3.FUSEError(errno.EROFS)
        if not handle.writable:
            raise pyfuse3.FUSEError(errno.EBADF)
        size = handle.view.size
        write = self.order.begin(handle.inode, offset, offset + len(buf))
        try:  # (in flight until the other views are told: see KernelFreshness.after_write)
            try:  # (EditRefused: a .npy stream whose header makes no array)
                written = await self.workers.run(handle.view.write, offset, buf)
            finally:
                if handle.view.size != size:  # grown by a write past the end
                    await self.fresh.invalidate_stale()
            handle.wrote = True
            await self.fresh.after_write(handle.node, handle.inode, through_pages=handle.page_cached)
            self.times.written(handle.inode)
        finally:
            self.order.end(handle.inode, write)
        return written

    @boundary
    async def flush(self, fh: int) -> None:
        handle = self._handle(fh)
        if handle.wrote:
            await self.workers.flush(handle.view.flush)
        if handle.node.role == UPLOAD:
            await self.upload_closed(handle.node, released=False)

    @boundary
    async def fsync(self, fh: int, datasync: bool) -> None:
        await self.workers.flush(self._handle(fh).view.flush)

    @boundary
    async def release(self, fh: int) -> None:
        handle = self._handles.pop(fh, None)
        if handle is not None and handle.readahead is not None:
            handle.readahead.close()
        try:
            if handle is not None and handle.wrote:
                # Pages written through a shared mapping can arrive after the last close.
                await self.workers.flush(handle.view.flush)
        finally:
            if handle is not None and handle.node.role == UPLOAD:
                await self.upload_closed(handle.node)
