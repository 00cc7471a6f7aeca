"""Keeping what the kernel caches of a mount's files true: to the other files that show the
same bytes (coherence within the mount) and to the store (close-to-open with other writers).

Chunk files are direct_io: no page cache, every read is answered by the daemon, always
current. `data` (and data.npy) keep their page cache. After a write through another file that
shows the same bytes, their pages are dropped at once if one of them is open
(`kernel.drop_pages`), or else when they are next opened: opened without keep_cache, the kernel
drops them in the opener's context. After another writer changed the store, a file opened (or,
with recheck=SECONDS, kept open) shows the change the same way.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

import pyfuse3
import trio

from ..errors import ZarrfsError
from ..tree import CHUNK, Ref, Tree
from .kernel import drop_pages, invalidate_attributes, invalidate_attributes_of
from .pages import Pages

log = logging.getLogger(__name__)


class OpenFile(Protocol):
    node: Ref
    inode: int
    page_cached: bool
    writable: bool


class KernelFreshness:
    def __init__(self, tree: Tree, in_thread: Callable[..., Awaitable[Any]],
                 open_files: Callable[[], Iterable[OpenFile]],
                 nursery: Callable[[], trio.Nursery], writing: Callable[[int], bool], *,
                 recheck_bound: float | None = None, pages: Pages | None = None) -> None:
        """`writing(inode)`: whether a write to that file is in flight. `recheck_bound`: the
        longest an open waits for the store to say whether the file changed (None: no bound,
        a local store); past it the open serves what the mount has. `pages`: what pushes
        slabs into the page cache, fenced out before the kernel is told of a change."""
        self.tree = tree
        self._pages = pages
        self._recheck_bound = recheck_bound
        self._writing = writing
        self._nursery = nursery
        self._in_thread = in_thread
        self._open_files = open_files
        self.mtime_ns = time.time_ns()  # of every file: a change makes the kernel look again
        self._behind: set[int] = set()  # inodes whose cached pages may be stale
        self.outage = tree.store.outage  # (rechecks the store does not answer: `ask_store`)
        self.stopping = False
        self._dropping = 0  # page drops in flight

    def touch(self) -> None:
        self.mtime_ns = time.time_ns()

    def may_keep_pages(self, inode: int) -> bool:
        """At open: whether the kernel may keep what it caches of the file's pages."""
        behind = inode in self._behind
        self._behind.discard(inode)
        return not behind

    async def fence(self) -> None:
        """After a change to what files show, before the kernel is told: pushes of slabs in
        flight land first (those that begin later find their slabs stale), so none lands after
        the kernel dropped the file's pages or marked them stale."""
        if self._pages is not None and not self._pages.idle:
            await trio.to_thread.run_sync(self._pages.fence)

    async def after_write(self, node: Ref, written: int, through_pages: bool) -> None:
        """A write to `node` (inode `written`) is done (it returns when this does): the files
        showing the same bytes must show it too. `through_pages`: the write came through the
        page cache, which it updated, and the kernel holds the pages it wrote locked until it
        is answered."""
        self.touch()
        await self.fence()
        files = list(self._open_files())
        open_with_pages = {f.inode for f in files if f.page_cached}
        written_with_pages = {f.inode for f in files if f.page_cached and f.writable}
        sharing = list(self.tree.sharing_bytes(node))
        # (one trip to a thread for all: a trip each cost a 1 MiB write of `data` half its time)
        if sharing:
            await trio.to_thread.run_sync(invalidate_attributes_of, sharing)
        for inode in sharing:
            if inode not in open_with_pages:
                self._behind.add(inode)
            elif through_pages and inode in written_with_pages and self._writing(inode):
                # Its writer may be waiting, with its own pages locked, to drop ours: waiting
                # here for its pages would deadlock. Drop them once this write is answered
                # (only then: meanwhile a reader of that file could see its old pages).
                self._nursery().start_soon(self._drop_pages, inode)
            else:
                await self._drop_pages(inode)
        if not through_pages:
            self._written_directly(written, open_with_pages)

    def _written_directly(self, inode: int, open_with_pages: set[int]) -> None:
        """A write skipped the page cache (chunk files; `data` opened write-only): what other
        openers cached of the file is stale. The kernel marks its attributes stale with the
        write; recent kernels drop its pages too, older ones do not. Its readers may
        be waiting for this write (WriteOrder) with their pages locked, so they are dropped
        once the write is answered; meanwhile a read() sees the new mtime and drops them
        itself (auto_inval_data), a mapping only then."""
        if inode in open_with_pages:
            self._nursery().start_soon(self._drop_pages, inode)
        else:
            self._behind.add(inode)

    async def _drop_pages(self, inode: int) -> None:
        """Drop the kernel's pages of a file. It waits for pages locked by requests in flight,
        which are answered only while requests are read: once stopping, nothing is dropped
        (the mount goes, and its pages with it)."""
        if self.stopping:
            return
        self._dropping += 1
        try:
            await trio.to_thread.run_sync(drop_pages, inode)
        finally:
            self._dropping -= 1

    async def stop_dropping(self, patience: float = 10.0) -> None:
        """Before the daemon stops reading requests: no new page drops, and the ones in
        flight finish (they may wait for requests still to be read)."""
        self.stopping = True
        with trio.move_on_after(patience):
            while self._dropping:
                await trio.sleep(0.01)

    async def recheck(self, node: Ref) -> bool:
        """Close-to-open: whether another writer changed what `node` shows. The kernel is told
        of a new size; the caller opens without the stale pages."""
        changed = await self.ask_store(node, lambda: self.tree.recheck(node))
        if changed:
            self.touch()
            await self.fence()
            await self.invalidate_stale()
            self._behind.update(self.tree.sharing_bytes(node))  # seen through one file, stale in all
        return changed

    async def ask_store(self, node: Ref, question: Callable[[], bool]) -> bool:
        """`question()` in a worker as a recheck is asked (another writer's nodes in a
        group): within the recheck bound, not while the store is down; False without an answer
        (what the mount has is served meanwhile)."""
        if self.outage.ongoing():
            return False
        answer: bool | None = None
        try:
            with trio.move_on_after(self._recheck_bound if self._recheck_bound is not None else math.inf):
                answer = await self._in_thread(question)
        except (OSError, ZarrfsError) as e:
            self.outage.check_failed(node.describe(), str(e))
            return False
        if answer is None:
            self.outage.check_failed(node.describe(), f"no answer within {self._recheck_bound:g} s")
            return False
        self.outage.ended()
        return answer

    async def recheck_open_files(self, seconds: float) -> None:
        """`recheck=SECONDS`: open files follow other writers. A changed file gets a new mtime
        and stale attributes, so the kernel drops its pages at the next read."""
        while True:
            await trio.sleep(seconds)
            nodes = {f.node for f in self._open_files()}
            arrays_checked: set[str] = set()
            for node in nodes:
                if node.role != CHUNK:  # one look at the whole array serves all its files
                    if node.path in arrays_checked:
                        continue
                    arrays_checked.add(node.path)
                if await self.recheck(node):
                    showing = {f.inode for f in self._open_files() if f.node.path == node.path}
                    for inode in showing:
                        await trio.to_thread.run_sync(invalidate_attributes, inode)

    async def invalidate_stale(self) -> None:
        """After a resize: sizes the kernel caches, and chunk files that are gone. Entry
        invalidation is queued by libfuse (it waits on nothing); attribute invalidation
        never waits on pages (see invalidate_attributes)."""
        await self.fence()
        stale = self.tree.take_stale()
        for parent, name in stale.entries:
            with contextlib.suppress(OSError):
                pyfuse3.invalidate_entry_async(parent, name.encode(), ignore_enoent=True)
        for inode in stale.inodes:
            await trio.to_thread.run_sync(invalidate_attributes, inode)


class WriteOrder:
    """Reads of a file wait for the writes to the same bytes that reached the daemon before
    them. A page the kernel has written through may be dropped (drop_pages) while the write
    is in flight and read again at once; answered from before the write, that read would
    leave the old bytes cached after the write returned. pyfuse3 starts handlers in the
    order the kernel sent the requests, so `begin` and `wait_for` must run before a
    handler's first await."""

    def __init__(self) -> None:
        self._writes: dict[int, list[tuple[int, int, trio.Event]]] = {}

    def begin(self, inode: int, start: int, end: int) -> tuple[int, int, trio.Event]:
        write = (start, end, trio.Event())
        self._writes.setdefault(inode, []).append(write)
        return write

    def end(self, inode: int, write: tuple[int, int, trio.Event]) -> None:
        writes = self._writes[inode]
        writes.remove(write)
        if not writes:
            del self._writes[inode]
        write[2].set()

    def writing(self, inode: int) -> bool:
        return inode in self._writes

    async def wait_for(self, inode: int, start: int, end: int) -> None:
        earlier = [done for s, e, done in self._writes.get(inode, ()) if s < end and start < e]
        for done in earlier:
            await done.wait()
