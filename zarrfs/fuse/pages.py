"""Decoded slabs pushed into the kernel's page cache ahead of a sequential reader
(FUSE_NOTIFY_STORE), from threads of their own: the kernel finds the pages there and sends the
request loop only what it still lacks. pyfuse3 replies from one thread, holding the interpreter
lock while the kernel copies; `notify_store` lets go of it, so pushes from two threads copy
while the loop answers (docs/performance.md, "Pages pushed").

The first page of each slab is left for the reader to ask for: its request tells the file's
readahead where the reader is, which starts the slabs after it, as a reader's requests always
did. Pages the reader asked for before they were pushed are not pushed again.

Never a stale page. A push checks, just before each piece, that its slab is still current (no
element of the array changed since it began) and holds a ticket while it stores the piece; a
change bumps the array's count first and then `fence`s, waiting for the tickets out, before it
drops or marks stale what the kernel caches, so no push lands after that. A file opened for
writing is never pushed again while mounted: its pages may be dirty (a write in flight, or a
mapping written after its close), and a push would overwrite them.
"""

from __future__ import annotations

import itertools
import logging
import mmap
import queue
import threading
from collections.abc import Callable
from typing import NamedTuple

from ..views import Ahead, Streaming

log = logging.getLogger(__name__)

PIECE_BYTES = 1 << 20  # stored at a time: a change waits for at most one piece a pusher
PAGE = mmap.PAGESIZE
STOP_PATIENCE = 10.0  # seconds a stop waits for a push blocked on a page the kernel holds


class Push(NamedTuple):
    inode: int
    ahead: Ahead
    reading: Streaming


StorePages = Callable[[int, int, memoryview], None]  # (inode, offset, bytes): kernel.store_pages


class Pages:
    """The pushes of one mount: `push` (on the request loop, never waits) hands the slabs a
    reading started ahead to `threads` threads, which wait for each, then store it."""

    def __init__(self, store: StorePages, threads: int, pushed: Callable[[int], None]) -> None:
        """`pushed(n)`: n bytes went into the page cache."""
        self._store = store
        self._pushed = pushed
        self._queue: queue.SimpleQueue[Push | None] = queue.SimpleQueue()
        self._changed = threading.Condition()
        self._in_flight: dict[int, int] = {}  # ticket: inode
        self._tickets = itertools.count()
        self._refused: set[int] = set()  # inodes opened for writing
        self._stopped = False
        self._failed_once = False
        self._threads = [threading.Thread(target=self._run, name=f"zarrfs-pages-{n}", daemon=True)
                         for n in range(threads)]
        for thread in self._threads:
            thread.start()

    def push(self, inode: int, reading: Streaming) -> None:
        for ahead in reading.take_ahead():
            if inode not in self._refused and not self._stopped:
                self._queue.put(Push(inode, ahead, reading))

    def refuse(self, inode: int) -> None:
        """No more pushes to `inode` (it is opened for writing); those in flight may still
        land: `fence` after this."""
        with self._changed:
            self._refused.add(inode)

    @property
    def idle(self) -> bool:
        """No piece is being stored now (a `fence` would not wait)."""
        return not self._in_flight

    def fence(self) -> None:
        """Wait until the pieces being stored now are stored (blocking: not on the request
        loop, whose replies may unlock the pages they wait for). Pieces begun later check
        their slab anew."""
        with self._changed:
            waited = set(self._in_flight)
            self._changed.wait_for(lambda: waited.isdisjoint(self._in_flight))

    def stop(self) -> None:
        """No more pushes; the threads end once their piece is stored (while requests are
        still answered: a piece may wait for a page a request holds)."""
        with self._changed:
            self._stopped = True
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(STOP_PATIENCE)

    def _run(self) -> None:
        while (push := self._queue.get()) is not None:
            try:
                self._push(push)
            except Exception:  # (a bug: pushes are only speed, the reader's requests stay)
                log.exception("pushing pages of inode %d failed", push.inode)

    def _push(self, push: Push) -> None:
        slab = push.ahead.slab
        if not slab.wait() or not slab.pin():
            return
        try:
            # (the first page is left for the reader to ask for; the last partial page too)
            start = _page_up(push.ahead.offset + 1)
            end = (push.ahead.offset + push.ahead.size) // PAGE * PAGE
            while start < end:
                start = max(start, _page_up(push.reading.reader_end))
                stop = min(start + PIECE_BYTES, end)
                if start >= stop or not self._store_piece(push, start, stop):
                    return
                start = stop
        finally:
            slab.unpin()

    def _store_piece(self, push: Push, start: int, stop: int) -> bool:
        """Store bytes [start, stop) of the file from the slab, if it is still current;
        whether the push goes on."""
        with self._changed:
            if self._stopped or push.inode in self._refused:
                return False
            ticket = next(self._tickets)
            self._in_flight[ticket] = push.inode
        pushed = 0
        try:
            slab = push.ahead.slab
            piece = slab.piece(start - push.ahead.offset, stop - push.ahead.offset) if slab.current else None
            if piece is None:
                return False
            self._store(push.inode, start, piece)
            pushed = stop - start
            return True
        except OSError as e:  # (ENOENT: the kernel forgot the inode; ENODEV: unmounted)
            if not self._failed_once:
                self._failed_once = True
                log.info("pages of inode %d not pushed (%s): its reader's requests fetch them",
                         push.inode, e)
            return False
        finally:
            with self._changed:
                del self._in_flight[ticket]
                self._changed.notify_all()
            self._pushed(pushed)


def _page_up(offset: int) -> int:
    return -(-offset // PAGE) * PAGE
