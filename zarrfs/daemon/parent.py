"""A mount made by the Python API ends with the process that made it (`zarrfs.mount`, unless
`outlive=True`): a Dask worker killed mid-task must not leave its daemon serving for ever on a
temporary mountpoint no one else knows.

The API names its own pid and its temporary directory in the daemon's environment. Once
serving, the daemon watches that process (a pidfd: no polling, no pid reuse); when it is gone
the daemon stops as on SIGTERM (everything written back, then unmounted) and, at its end,
removes the temporary directory, which nobody else would."""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import signal
import threading

log = logging.getLogger("zarrfs")

PARENT_VARIABLE = "ZARRFS_END_WITH_PID"
WORKDIR_VARIABLE = "ZARRFS_END_REMOVES"


class Parent:
    """The process the mount ends with, once `watch` was called; `ended` after it died."""

    def __init__(self, pid: int, workdir: str | None) -> None:
        self.pid = pid
        self.workdir = workdir
        self.ended = False

    @classmethod
    def from_environment(cls) -> Parent | None:
        text = os.environ.pop(PARENT_VARIABLE, None)
        workdir = os.environ.pop(WORKDIR_VARIABLE, None)
        if text is None or not text.isdigit():
            return None
        return cls(int(text), workdir)

    def watch(self) -> None:
        """Stop the daemon as SIGTERM does when the process is gone (now, if it already is)."""
        try:
            pidfd = os.pidfd_open(self.pid)
        except ProcessLookupError:
            pidfd = None
        if pidfd is None or os.getppid() != self.pid:  # (gone before we looked: reparented)
            self._gone()
            return
        threading.Thread(target=self._wait, args=(pidfd,), name="zarrfs-parent", daemon=True).start()

    def _wait(self, pidfd: int) -> None:
        select.select([pidfd], [], [])
        os.close(pidfd)
        self._gone()

    def _gone(self) -> None:
        self.ended = True
        log.info("the process that made this mount (pid %d) ended: writing back and unmounting", self.pid)
        os.kill(os.getpid(), signal.SIGTERM)

    def leave_nothing(self, mountpoint: str) -> None:
        """After the unmount, when the process is gone: its temporary directory, the mountpoint
        in it (rmdir, never a removal through a mount) and the log with them."""
        if not self.ended or self.workdir is None or os.path.dirname(mountpoint) != self.workdir:
            return
        with contextlib.suppress(OSError):
            os.rmdir(mountpoint)
        if not os.path.exists(mountpoint):
            shutil.rmtree(self.workdir, ignore_errors=True)
