"""The mountpoint of a new mount: checked before mounting (a directory, not mounted already; a
mount left by a daemon that died is cleared, one whose daemon is stuck is named with the way to
abort it), and the kernel's readahead for it set once it serves."""

from __future__ import annotations

import errno
import logging
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import TextIO, TypeVar

from ..errors import MountError, MountNotAnswering

log = logging.getLogger("zarrfs")

# The extended attribute of a mount's root holding its counters (`zarrfs stats`).
STAT_SECONDS = 10.0  # how long a probe of a mountpoint may take before it is called stuck
T = TypeVar("T")


def check_mountpoint(mountpoint: str) -> None:
    """MountError if `mountpoint` cannot take a new mount; a stale one is cleared first."""
    answering(mountpoint, lambda: _check(mountpoint))


def _check(mountpoint: str) -> None:
    try:
        info = os.stat(mountpoint)
    except FileNotFoundError:
        raise MountError(f"mountpoint {mountpoint} does not exist") from None
    except OSError as e:
        if e.errno != errno.ENOTCONN:
            raise MountError(f"mountpoint {mountpoint}: {e.strerror}") from None
        _clear_stale_mount(mountpoint)
        info = os.stat(mountpoint)
    if not os.path.isdir(mountpoint):
        raise MountError(f"mountpoint {mountpoint} is not a directory")
    if os.path.ismount(mountpoint) and info.st_dev != os.stat(os.path.dirname(mountpoint)).st_dev:
        try:
            # A stat may be answered from cached attributes; a listing reaches the daemon.
            os.listdir(mountpoint)
        except OSError as e:
            if e.errno != errno.ENOTCONN:
                raise MountError(f"mountpoint {mountpoint}: {e.strerror}") from None
            _clear_stale_mount(mountpoint)
            return
        raise MountError(f"{mountpoint} is already a mount point; unmount it first")


def answering(path: str | os.PathLike[str], probe: Callable[[], T], seconds: float = STAT_SECONDS) -> T:
    """What `probe` (of the mount at `path`: a stat, a listing, an attribute) returns, but a
    mount whose daemon is stuck (or killed while the kernel waited on it) must not hang the
    command: past `seconds`, MountNotAnswering says what is wrong and how to clear it. The
    probe's thread is left blocked in the kernel; the abort releases it."""
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(probe())
        except BaseException as e:  # (re-raised in the caller's thread)
            failure.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if failure:
        raise failure[0]
    if not result:
        raise MountNotAnswering(not_answering(os.path.abspath(path)))
    return result[0]


def not_answering(path: str) -> str:
    """The one message for a mount that does not answer, with the commands that abort it."""
    device = mount_device(path) or "?"
    return (
        f"mountpoint {path} does not answer: its daemon is stuck or died mid-request; abort "
        f"it with: echo 1 > /sys/fs/fuse/connections/{device.split(':')[-1]}/abort "
        f"(mount -t fusectl none /sys/fs/fuse/connections if that is missing), then "
        f"fusermount3 -u {path}"
    )


def _clear_stale_mount(mountpoint: str) -> None:
    """A daemon that was killed leaves "transport endpoint is not connected" behind."""
    result = subprocess.run(["fusermount3", "-u", "-z", mountpoint], capture_output=True, text=True)
    if result.returncode != 0:
        raise MountError(
            f"mountpoint {mountpoint} is left over from a daemon that died and could not be "
            f"cleared ({result.stderr.strip()}); run: fusermount3 -u {mountpoint}"
        )
    print(f"zarrfs: cleared the stale mount left on {mountpoint} by a daemon that died",
          file=sys.stderr)


def readahead_setting(mountpoint: str) -> TextIO | None:
    """The kernel's readahead setting of the new mount at `mountpoint`, opened to be written
    by `set_readahead` once it serves (the kernel's handshake resets it): opened now, while
    the daemon may (one of `-o user=` may not once it serves)."""
    device = mount_device(mountpoint)
    if device is None:
        return None
    path = f"/sys/class/bdi/{device}/read_ahead_kb"
    try:
        return open(path, "w")
    except OSError as e:
        log.debug("could not open %s: %s", path, e)
        return None


def set_readahead(setting: TextIO | None, kilobytes: int) -> None:
    """Larger kernel readahead means larger read requests (the kernel caps them at 1 MiB)."""
    if setting is None:
        return
    try:
        with setting:
            setting.write(str(kilobytes))
    except OSError as e:
        log.debug("could not set %s: %s", setting.name, e)


def mount_device(mountpoint: str) -> str | None:
    """The "major:minor" of a mount, from mountinfo (a stat would wait for our own daemon)."""
    device = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if unescape(fields[4]) == mountpoint:
                device = fields[2]  # the last match is the mount on top
    return device


def unescape(path: str) -> str:
    """A path as /proc/*/mountinfo and /proc/mounts write it: octal escapes for space, tab,
    newline and backslash."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)
