"""Writes answered before they are applied.

A write of whole elements inside a file as it is (`FileView.deferrable`: it changes no size or
header and reads nothing first) is answered once its bytes are queued; one thread applies the
queued writes, in the order they came, while the kernel sends the next. `dd` waits on each
answer: of the 2.8 ms a MiB of a whole-array write took, 1.6 went into applying it.

What a file system promises holds: a read waits until the writes answered before it began are
applied, whatever file they went through (`upto`, then `caught_up`: bytes of a chunk written
through `data` read through its chunk file, or `data.tif`); a write that is not deferred, a
resize and a change to the tree wait the same way (a writer's writes land in the order it made
them); flush, fsync and close wait too, and report the first of their file's writes that failed
after it was answered, as a file system reports a failed write-back at fsync (the data stays
dirty, as any failed write-back leaves it)."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

import trio

log = logging.getLogger(__name__)
PENDING_BYTES = 16 << 20  # queued and not yet applied, at most (a writer waits beyond it)


@dataclass
class _Apply:
    inode: int
    write: Callable[[], object]
    nbytes: int
    applied: Callable[[], None]  # (on the loop, once applied or failed)


class Applies:
    """The queued writes of one mount, and their thread (started at the first)."""

    def __init__(self, limit: int = PENDING_BYTES) -> None:
        self._limit = limit
        self._jobs: queue.SimpleQueue[_Apply | None] = queue.SimpleQueue()
        self._token: trio.lowlevel.TrioToken | None = None
        self._thread: threading.Thread | None = None
        self._held = 0  # bytes queued, not yet applied
        self._queued = self._applied = 0  # writes ever queued, and applied (in that order)
        self._failed: dict[int, BaseException] = {}  # inode -> its first failure not yet reported
        self._waiting: list[tuple[Callable[[], bool], trio.Event]] = []

    async def submit(self, inode: int, defer: Callable[[], Callable[[], object]], nbytes: int,
                     applied: Callable[[], None]) -> None:
        """Queue a write of `nbytes` to `inode`, waiting first while too much is queued, then
        made pending by `defer` (FileView.defer: from then on no stream of its array is
        current) and queued at once; `applied` runs on the loop once it is applied (or failed)."""
        if self._thread is None:
            self._token = trio.lowlevel.current_trio_token()
            self._thread = threading.Thread(target=self._run, name="zarrfs-applies", daemon=True)
            self._thread.start()
        await self._until(lambda: self._held < self._limit)
        write = defer()
        self._held += nbytes
        self._queued += 1
        self._jobs.put(_Apply(inode, write, nbytes, applied))

    def upto(self) -> int:
        """The writes answered so far (call it before the handler's first await: a write
        answered later may be one the kernel sent after this request)."""
        return self._queued

    async def caught_up(self, upto: int | None = None) -> None:
        """Wait until the writes answered before `upto` (default: now) are applied."""
        target = self._queued if upto is None else upto
        await self._until(lambda: self._applied >= target)

    def take_failure(self, inode: int) -> BaseException | None:
        """The first queued write to `inode` that failed since this was last asked, if any."""
        return self._failed.pop(inode, None)

    def close(self) -> None:
        """Apply what is queued, then end the thread (after the loop: nothing is told)."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            error: BaseException | None = None
            try:
                job.write()
            except BaseException as e:  # (reported at the file's next write, flush or fsync)
                error = e
                log.error("a write to inode %d failed after it was answered (reported at its "
                          "flush or fsync): %s: %s", job.inode, type(e).__name__, e)
            try:
                assert self._token is not None
                self._token.run_sync_soon(self._done, job, error)
            except trio.RunFinishedError:  # (the mount is stopping: nobody waits on the loop)
                pass

    def _done(self, job: _Apply, error: BaseException | None) -> None:
        self._held -= job.nbytes
        self._applied += 1
        if error is not None:
            self._failed.setdefault(job.inode, error)
        job.applied()
        for condition, event in list(self._waiting):
            if condition():
                self._waiting.remove((condition, event))
                event.set()

    async def _until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            event = trio.Event()
            self._waiting.append((condition, event))
            await event.wait()
