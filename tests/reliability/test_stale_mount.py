"""Left-over and doubled mounts: a daemon killed with SIGKILL leaves a mountpoint that answers
"Transport endpoint is not connected"; `zarrfs mount` on it clears it (saying so in one line)
and mounts, also right after a kill under a write load (writes acknowledged before the kill are
all there), and `fusermount3 -u` clears it too. Mounting on a live zarrfs mount is refused in
one line and leaves that mount serving."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.mounting import ZARRFS, Mount, is_mounted, mounted, without_views

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)

SHAPE = (12, 10)
VALUES = np.arange(120, dtype="<u2").reshape(SHAPE)


@pytest.fixture
def array(tmp_path: Path) -> Path:
    """A 12x10 uint16 array holding VALUES, written through `zarrfs create` and a mount."""
    path = tmp_path / "array"
    subprocess.run([ZARRFS, "create", str(path), "--shape", "12,10", "--dtype", "uint16",
                    "--chunks", "5,4", "--codec", "zstd:1"], check=True, capture_output=True)
    with mounted(path, tmp_path / "setup") as mount:
        fd = os.open(mount.data, os.O_WRONLY)  # in place: the files have a fixed size
        try:
            os.pwrite(fd, VALUES.tobytes(), 0)
        finally:
            os.close(fd)
    return path


def read_values(mountpoint: Path) -> np.ndarray:
    return np.frombuffer((mountpoint / "data").read_bytes(), dtype="<u2").reshape(SHAPE)


def kill_daemon(process: subprocess.Popen[bytes], mountpoint: Path) -> None:
    """SIGKILL a foreground daemon and check the mountpoint it leaves behind is stale."""
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    assert is_mounted(mountpoint), "a killed daemon's mount should stay in /proc/mounts"
    # Listing asks the (dead) daemon; a stat may still be answered from the kernel's cache.
    with pytest.raises(OSError) as caught:
        os.listdir(mountpoint)
    assert caught.value.errno == errno.ENOTCONN, caught.value
    assert caught.value.strerror == "Transport endpoint is not connected"


# -- background daemons (`zarrfs mount` without -f), found by the pid in their log ------------


def daemon_pid(log: Path) -> int:
    match = re.search(r"zarrfs\[(\d+)\]", log.read_text(errors="replace"))
    assert match, f"no pid in the daemon log:\n{log.read_text(errors='replace')}"
    return int(match.group(1))


def running(pid: int) -> bool:
    """Alive and not a zombie (a daemon that is nobody's child may stay one for a while)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def unmount_daemon(mountpoint: Path, log: Path, timeout: float = 20.0) -> None:
    """Unmount a background daemon's mount and wait until that daemon has exited."""
    pid = daemon_pid(log) if log.exists() else None
    for _ in range(50):
        if not is_mounted(mountpoint):
            break
        subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True)
        if is_mounted(mountpoint):
            time.sleep(0.1)
    if pid is None:
        return
    deadline = time.monotonic() + timeout
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if running(pid):
        os.kill(pid, signal.SIGKILL)
        subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], capture_output=True)
        raise AssertionError(f"the daemon {pid} did not exit after its unmount:\n"
                             f"{log.read_text(errors='replace')}")


@pytest.fixture
def background(tmp_path: Path) -> Iterator[list[tuple[Path, Path]]]:
    """(mountpoint, log) of the background daemons a test starts; unmounted at its end."""
    started: list[tuple[Path, Path]] = []
    yield started
    for mountpoint, log in started:
        unmount_daemon(mountpoint, log)


def zarrfs_mount(source: Path, mountpoint: Path, log: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ZARRFS, "mount", str(source), str(mountpoint), "-o", f"log={log}"],
                          capture_output=True, text=True, timeout=60)


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{stderr}"
    return lines[0]


# -- tests -----------------------------------------------------------------------------------


def check_mount_clears_the_stale_mount(
    array: Path, mountpoint: Path, log: Path, background: list[tuple[Path, Path]]
) -> None:
    check_mount_clears_the_stale_mount_with(array, mountpoint, log, background)
    assert np.array_equal(read_values(mountpoint), VALUES)


def check_mount_clears_the_stale_mount_with(
    array: Path, mountpoint: Path, log: Path, background: list[tuple[Path, Path]]
) -> None:
    """`zarrfs mount` on the stale mountpoint: says it cleared it, in one line, and serves."""
    background.append((mountpoint, log))
    done = zarrfs_mount(array, mountpoint, log)
    assert done.returncode == 0, done.stderr
    line = one_line(done.stderr)
    assert "stale" in line and str(mountpoint) in line, line
    assert done.stdout == ""
    # Cleared and mounted again: one mount, serving the array.
    with open("/proc/self/mounts") as f:
        entries = [entry for entry in f if entry.split()[1] == str(mountpoint)]
    assert len(entries) == 1, entries
    assert without_views(os.listdir(mountpoint)) == ["chunks", "data", "zarr.json"]


def test_mount_clears_the_stale_mount_of_a_killed_daemon(
    array: Path, tmp_path: Path, background: list[tuple[Path, Path]]
) -> None:
    mountpoint = tmp_path / "mnt"
    with mounted(array, mountpoint) as first:
        assert np.array_equal(read_values(mountpoint), VALUES)
        kill_daemon(first.process, mountpoint)
        check_mount_clears_the_stale_mount(array, mountpoint, tmp_path / "second.log",
                                           background)


def test_fusermount_clears_a_stale_mount(array: Path, tmp_path: Path) -> None:
    mountpoint = tmp_path / "mnt"
    with mounted(array, mountpoint) as first:
        kill_daemon(first.process, mountpoint)
        done = subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True,
                              text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert not is_mounted(mountpoint)
        assert os.listdir(mountpoint) == []  # the plain, empty directory again
    # The cleared directory takes a new mount as usual.
    with mounted(array, mountpoint):
        assert np.array_equal(read_values(mountpoint), VALUES)


def test_mount_on_a_live_mount_is_refused_in_one_line(
    array: Path, tmp_path: Path, background: list[tuple[Path, Path]]
) -> None:
    mountpoint = tmp_path / "mnt"
    with mounted(array, mountpoint) as live:
        log = tmp_path / "second.log"
        done = zarrfs_mount(array, mountpoint, log)
        if done.returncode == 0:  # it mounted on top: make sure that one goes away too
            background.append((mountpoint, log))
        assert done.returncode == 1, done.stderr
        line = one_line(done.stderr)
        assert str(mountpoint) in line and "already a mount point" in line, line
        assert not log.exists() or "mounted" not in log.read_text()
        # The live mount is untouched and still serving.
        assert live.process.poll() is None
        with open("/proc/self/mounts") as f:
            assert sum(entry.split()[1] == str(mountpoint) for entry in f) == 1
        assert np.array_equal(read_values(mountpoint), VALUES)


def write_rounds(fd: int, acknowledged: list[int], stop: threading.Event) -> OSError:
    """Round r writes VALUES + r over the whole array and fsyncs it; the rounds whose fsync
    returned go to `acknowledged`. Returns the error that ended the loop (the daemon died)."""
    for r in itertools.count(1):
        try:
            os.pwrite(fd, (VALUES + r).astype("<u2").tobytes(), 0)
            os.fsync(fd)
        except OSError as e:
            return e
        acknowledged.append(r)
        if stop.is_set():
            break
    raise AssertionError("writes went on after the daemon was killed")


def read_until_error(fd: int, stop: threading.Event) -> OSError | None:
    """Reads of another view of the same bytes (the daemon keeps the views coherent) through a
    file of the first mount, until one fails; None if they still succeeded when `stop` was
    set (reads the kernel answers from its page cache never reach the dead daemon)."""
    while not stop.is_set():
        try:
            os.pread(fd, 1 << 16, 0)
        except OSError as e:
            return e
    return None


def close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):  # a file of a dead mount may fail to close
        os.close(fd)


def killed_under_load(mount: Mount, fds: list[int], acknowledged: list[int],
                      stop: threading.Event) -> list[Future[OSError | None]]:
    """The writer on fds[0] and readers on the others; SIGKILL once 20 rounds are
    acknowledged. The futures of the errors that ended each of them."""
    pool = ThreadPoolExecutor(len(fds))
    try:
        futures = [pool.submit(write_rounds, fds[0], acknowledged, stop),
                   *(pool.submit(read_until_error, fd, stop) for fd in fds[1:])]
        deadline = time.monotonic() + 30
        while len(acknowledged) < 20 and not futures[0].done() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(acknowledged) >= 20, (acknowledged, futures[0].done() and futures[0].result())
        mount.process.send_signal(signal.SIGKILL)
        mount.process.wait(timeout=10)
        return futures
    finally:
        pool.shutdown(wait=False)


def test_remount_after_sigkill_under_a_write_load(
    array: Path, tmp_path: Path, background: list[tuple[Path, Path]]
) -> None:
    """A writer (pwrite + fsync, round after round) and readers of the other views while the
    daemon is killed: every request of an open file that reaches the daemon fails (ENOTCONN,
    or ECONNABORTED for a request in flight) and keeps failing; `zarrfs mount` on the same
    mountpoint right away clears the stale mount and serves; and the array holds the last
    acknowledged round or the one after it (written, its fsync failed: maybe stored), never
    anything older."""
    mountpoint = tmp_path / "mnt"
    acknowledged: list[int] = []
    stop = threading.Event()
    with mounted(array, mountpoint) as first, contextlib.ExitStack() as files:
        fds = [os.open(first.data, os.O_WRONLY), os.open(mountpoint / "data.npy", os.O_RDONLY),
               os.open(mountpoint / "chunks/c/1/1", os.O_RDONLY)]
        for fd in fds:
            files.callback(close_quietly, fd)
        try:
            futures = killed_under_load(first, fds, acknowledged, stop)
            check_mount_clears_the_stale_mount_with(array, mountpoint, tmp_path / "second.log",
                                                    background)
        finally:
            stop.set()  # the threads end whatever happened
        write_error, npy_error, chunk_error = (f.result(timeout=30) for f in futures)
        dead = {errno.ENOTCONN, errno.ECONNABORTED}
        # The writer and the chunk file (no page cache) reach the daemon: they must fail.
        # data.npy may still answer from the kernel's page cache, the old bytes.
        assert write_error is not None and write_error.errno in dead, write_error
        assert chunk_error is not None and chunk_error.errno in dead, chunk_error
        assert npy_error is None or npy_error.errno in dead, npy_error
        last = acknowledged[-1]
        now = read_values(mountpoint)
        older = (now != VALUES + last) & (now != VALUES + last + 1)
        assert not older.any(), (last, now - VALUES)
        # The new mount takes writes as usual.
        fd = os.open(mountpoint / "data", os.O_WRONLY)
        try:
            os.pwrite(fd, VALUES.tobytes(), 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        assert np.array_equal(read_values(mountpoint), VALUES)
