"""Mount an array with the real `zarrfs` command for a test, and always unmount it.

The daemon runs in the foreground (`-f`) as a child process, so a test can signal it, wait
for it to exit (which is when its final write-back is done) and read its log.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ZARRFS = shutil.which("zarrfs", path=os.path.dirname(sys.executable)) or "zarrfs"
MOUNT_TIMEOUT = 20.0


def is_mounted(path: Path) -> bool:
    target = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == target for line in f)


@dataclass
class Mount:
    path: Path
    process: subprocess.Popen[bytes] | Daemon
    log_path: Path

    @property
    def data(self) -> Path:
        return self.path / "data"

    def chunk(self, key: str) -> Path:
        return self.path / "chunks" / key

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, text: str, timeout: float = 10.0) -> str:
        """The log once it holds `text` (the daemon writes some lines just after the mount
        appears); AssertionError if it does not within `timeout`."""
        deadline = time.monotonic() + timeout
        while text not in (log := self.log()):
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not in the log within {timeout:g} s:\n{log}")
            time.sleep(0.02)
        return log

    def unmount(self, timeout: float = 60.0) -> int:
        """Unmount and wait for the daemon to finish writing back; its exit status."""
        if is_mounted(self.path):
            _fusermount_unmount(self.path)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)  # a daemon stuck in the kernel may never go
            raise AssertionError(f"zarrfs did not exit after unmounting:\n{self.log()}") from None

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        """Signal the daemon (it flushes and unmounts itself); its exit status."""
        self.process.send_signal(signum)
        try:
            status = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
            raise AssertionError(f"zarrfs did not stop on signal {signum}:\n{self.log()}") from None
        if is_mounted(self.path):
            _fusermount_unmount(self.path)
        return status


# mount_array(source, options=(), **kwargs) -> Mount: the fixture of tests/conftest.py.
MountFactory = Callable[..., Mount]


def timed(action: Callable[[], Any]) -> tuple[Any, float]:
    """What `action` returned, or the OSError it raised; and how long it took."""
    began = time.monotonic()
    try:
        result: Any = action()
    except OSError as e:
        result = e
    return result, time.monotonic() - began


def mount_stats(mount: Mount | Path) -> dict[str, Any]:
    """`zarrfs stats --json` of a mount (a `Mount`, or its path): its counters and figures, by
    this checkout's command (ZARRFS), not whichever `zarrfs` is first on the PATH."""
    path = mount if isinstance(mount, os.PathLike) else mount.path  # (this module's Mount too)
    out = subprocess.run([ZARRFS, "stats", "--json", str(path)], check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout))


def pread(path: Path, size: int, offset: int) -> bytes:
    """`size` bytes at `offset` of a file opened for this read alone."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, size, offset)
    finally:
        os.close(fd)


def _fusermount_unmount(path: Path) -> None:
    for _ in range(50):
        result = subprocess.run(["fusermount3", "-u", str(path)], capture_output=True)
        if result.returncode == 0 or not is_mounted(path):
            return
        time.sleep(0.1)  # busy: a test's file may still be closing
    subprocess.run(["fusermount3", "-u", "-z", str(path)], capture_output=True)


@contextlib.contextmanager
def mounted(
    source: str | Path,
    mountpoint: Path,
    options: Sequence[str] = (),
    *,
    env: dict[str, str] | None = None,
    command: Sequence[str] = (ZARRFS,),
    foreground: bool = True,
) -> Iterator[Mount]:
    """Mount `source` on `mountpoint` (created if needed) for the duration of the block.
    `foreground=False`: as an operator mounts, the command forks the daemon and returns;
    with no `log=` option on a machine without syslog the daemon then logs nowhere (the
    Mount's log holds only what the command printed)."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    log_path = mountpoint.parent / f"{mountpoint.name}.log"
    args = [*command, "mount", *(["-f"] if foreground else []), str(source), str(mountpoint)]
    if options:
        args += ["-o", ",".join(options)]
    with open(log_path, "wb") as log_file:
        process: Any = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT,
                                        env={**os.environ, **(env or {})})
    if not foreground:
        try:
            process = Daemon.of(process, args, log_path)
        except AssertionError:
            if is_mounted(mountpoint):
                _fusermount_unmount(mountpoint)
            raise
    mount = Mount(mountpoint, process, log_path)
    try:
        try:
            _wait_until_mounted(mount)
        except AssertionError:
            _abandon(mount)  # a late mount would be left behind, and unmount() wait for it
            raise
        yield mount
    finally:
        if process.poll() is None or is_mounted(mountpoint):
            mount.unmount()


class Daemon:
    """The daemon a `zarrfs mount` without -f forked, with the part of Popen's interface a
    Mount uses (it is not this process's child: its exit status is not known)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    @classmethod
    def of(cls, command: subprocess.Popen[bytes], args: list[str], log_path: Path) -> Daemon:
        """The daemon `command` forked, once it returned (the mount serving)."""
        if command.wait(MOUNT_TIMEOUT) != 0:
            raise AssertionError(f"zarrfs mount exited with {command.returncode}:\n"
                                 f"{log_path.read_text(errors='replace')}")
        running: dict[int, int] = {}  # (pid -> its parent, of the processes running `args`)
        for entry in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                # (the command is a script: its interpreter comes first)
                found = (entry / "cmdline").read_text().split("\0")[-len(args) - 1 : -1]
                if entry.name.isdigit() and found == args:
                    running[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        # (its fork server and decoding processes run them too: the daemon is their ancestor)
        daemons = [pid for pid, parent in running.items() if parent not in running]
        if len(daemons) != 1:
            raise AssertionError(f"not one daemon running {args}: {daemons}")
        return cls(daemons[0])

    def poll(self) -> int | None:
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            state = "Z"
        if state == "Z":
            self.returncode = 0
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
            time.sleep(0.02)
        return 0

    def send_signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _abandon(mount: Mount) -> None:
    """A daemon that did not mount in time: kill it, and clear the mount it may have made."""
    if mount.process.poll() is None:
        mount.process.kill()
        mount.process.wait(timeout=10)
    if is_mounted(mount.path):
        _fusermount_unmount(mount.path)


def _wait_until_mounted(mount: Mount) -> None:
    deadline = time.monotonic() + MOUNT_TIMEOUT
    while not is_mounted(mount.path):
        if mount.process.poll() is not None:
            raise AssertionError(f"zarrfs exited with {mount.process.returncode}:\n{mount.log()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"zarrfs did not mount within {MOUNT_TIMEOUT} s:\n{mount.log()}")
        time.sleep(0.02)
    # The mount exists; a first stat waits for the daemon to answer the kernel's INIT.
    os.stat(mount.path)


# -- when a daemon cannot be stopped ---------------------------------------------------------


def kernel_stacks(pids: list[int]) -> str:
    """Where the threads of stuck processes are in the kernel (threads merely waiting on a
    futex or in epoll are only counted)."""
    found, idle = [], 0
    for pid in pids:
        for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
            with contextlib.suppress(OSError):
                state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
                stack = (task / "stack").read_text().strip()
                if state != "D" and ("futex_wait" in stack or "epoll_wait" in stack):
                    idle += 1
                    continue
                frames = " <- ".join(line.split("] ", 1)[-1] for line in stack.splitlines()[:6])
                found.append(f"  {pid}/{task.name} ({state}): {frames or '(no kernel stack)'}")
    return "\n".join([*found, f"  and {idle} threads waiting on a futex or in epoll_wait"])


def fuse_connection(mountpoint: Path) -> str | None:
    """The number of a mount's FUSE connection (its device's minor number), to abort it by
    even after the mount is gone from the mount table."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == os.path.realpath(mountpoint):
                return fields[2].split(":")[1]
    return None


def abort_connection(connection: str | None, mountpoint: Path) -> None:
    """Abort a FUSE connection whose daemon cannot answer, so that the processes waiting on it
    (the daemon's own threads included) get ENOTCONN and can exit. Through fusectl, mounted
    for the purpose if need be (the only way once the daemon has unmounted); `umount -f` on
    the mountpoint otherwise."""
    connections = Path("/sys/fs/fuse/connections")
    if connection is not None and os.geteuid() == 0 and not any(connections.iterdir()):
        subprocess.run(["mount", "-t", "fusectl", "fusectl", str(connections)],
                       capture_output=True)
    abort = connections / str(connection) / "abort"
    if connection is not None and abort.exists():
        abort.write_text("1")
    else:
        subprocess.run(["umount", "-f", str(mountpoint)], capture_output=True)


VIEW_FILES = {"data.npy", "data.raw.nhdr", "data.mhd", "data.vrt", "data.tif", "data.h5", "data.nc",
              "data.ome.tif", "data.nii", "data.mrc", "data.fits"}


def without_views(names: list[str] | set[str]) -> list[str]:
    """A directory listing less the header views beside `data` (which depend on the data type
    and rank, and have tests of their own); any other `data.*` name is kept, so it fails."""
    return sorted(name for name in names if name not in VIEW_FILES)


# -- waiting for an event --------------------------------------------------------------------


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "the condition",
               poll: float = 0.005) -> Any:
    """Poll `predicate` until it returns something true, and return that; AssertionError
    naming `what` if it has not within `timeout` seconds. For waiting on an event a test cannot
    be told of directly (a daemon's work, another thread reaching a point), instead of
    sleeping for a guessed time."""
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(poll)
    return result
