"""A dead man's switch for a mount.

To keep the views of one array coherent, the daemon sometimes asks the kernel to drop cached
pages (fuse.kernel.drop_pages). That call waits for pages locked by requests in flight, which
the daemon's other threads answer. If the daemon is killed (SIGKILL, the OOM killer) while one
thread waits there, the other threads are gone, the pages stay locked, the waiting thread can
never return, the process never finishes exiting, and the mount hangs instead of failing.

The watchdog is a separate small process that holds nothing of the mount. It polls the
daemon: once the daemon's main thread has exited but some thread has not for a second, it
aborts the FUSE connection (through fusectl, as `umount -f` would), which releases the pages;
the daemon then finishes exiting and the mount fails with ENOTCONN, to be cleared by
`fusermount3 -u`. It exits when the daemon has exited, or closed the watchdog's stdin (the
daemon's own way to stop it, whoever either runs as).

With `-o user=NAME` the daemon starts it while it still has root, once mounted and before it
serves as NAME, and the watchdog becomes NAME itself, once its Python has loaded: NAME may not
be able to run (or read) the Python the daemon runs on (one in root's home), and a watchdog of
NAME's may do all it does (/proc, and the connection's `abort`, which is NAME's).

    python -m zarrfs.daemon.watchdog DAEMON_PID CONNECTION [UID:GID]
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import time

CONNECTIONS = "/sys/fs/fuse/connections"
POLL_SECONDS = 0.2
GRACE_SECONDS = 1.0


def start(daemon_pid: int, connection: str,
          ids: tuple[int, int] | None = None) -> subprocess.Popen[bytes] | None:
    """Start watching the daemon (from the daemon, once mounted), to become user and group
    `ids` once started. None where fusectl cannot be used (not root and not mounted).
    OSError if it cannot be started."""
    if not fusectl_ready():
        return None
    become = [] if ids is None else [f"{ids[0]}:{ids[1]}"]
    command = [sys.executable, "-m", "zarrfs.daemon.watchdog", str(daemon_pid), connection, *become]
    # `-m` imports from the working directory first: there, this zarrfs (not the daemon's
    # working directory's: the watchdog may run as root).
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, close_fds=True, cwd=package)


def stop(guard: subprocess.Popen[bytes]) -> None:
    """Stop the watchdog: its stdin closed, it exits (no signal: it may be another user's)."""
    if guard.stdin is not None:
        guard.stdin.close()
    guard.wait()


def fusectl_ready() -> bool:
    """Whether fusectl is mounted (mounted here when root: a daemon of `-o user=` asks while
    it still may)."""
    with contextlib.suppress(OSError):
        if os.listdir(CONNECTIONS):
            return True
        if os.geteuid() == 0:
            mount = ["mount", "-t", "fusectl", "fusectl", CONNECTIONS]
            subprocess.run(mount, capture_output=True, check=False)
            return bool(os.listdir(CONNECTIONS))
    return False


def become(ids: str) -> None:
    """Give root up for user and group `ids` ("UID:GID"), with no other groups."""
    uid, gid = (int(n) for n in ids.split(":"))
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def watch(pid: int, connection: str) -> None:
    stuck_since: float | None = None
    while True:
        state = _state(pid)
        if state is None:
            return  # exited and reaped
        if state == "Z" and _thread_count(pid) > 1:
            stuck_since = stuck_since or time.monotonic()
            if time.monotonic() - stuck_since > GRACE_SECONDS:
                _abort(connection)
                return
        elif state == "Z":
            return  # exited; the kernel released the connection
        if _stopped(POLL_SECONDS):
            return


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _thread_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def _stopped(seconds: float) -> bool:
    """Whether the daemon closed the watchdog's stdin (waiting up to `seconds` for it). A
    daemon killed mid-exit keeps it open: its file table lives while a thread of it does."""
    try:
        return bool(select.select([0], [], [], seconds)[0]) and not os.read(0, 1)
    except OSError:  # (no stdin: run by hand)
        time.sleep(seconds)
        return False


def _abort(connection: str) -> None:
    with contextlib.suppress(OSError), open(f"{CONNECTIONS}/{connection}/abort", "w") as f:
        f.write("1")


if __name__ == "__main__":
    if len(sys.argv) > 3:
        become(sys.argv[3])
    watch(int(sys.argv[1]), sys.argv[2])
