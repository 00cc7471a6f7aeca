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
`fusermount3 -u`. It exits when the daemon has exited.

    python -m zarrfs.daemon.watchdog DAEMON_PID CONNECTION
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

CONNECTIONS = "/sys/fs/fuse/connections"
POLL_SECONDS = 0.2
GRACE_SECONDS = 1.0


def start(daemon_pid: int, connection: str) -> subprocess.Popen[bytes] | None:
    """Start watching the daemon (from the daemon, once mounted). None where fusectl cannot
    be used (not root and not mounted)."""
    if not fusectl_ready():
        return None
    return subprocess.Popen([sys.executable, "-m", "zarrfs.daemon.watchdog", str(daemon_pid), connection],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, close_fds=True)


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
        time.sleep(POLL_SECONDS)


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


def _abort(connection: str) -> None:
    with contextlib.suppress(OSError), open(f"{CONNECTIONS}/{connection}/abort", "w") as f:
        f.write("1")


if __name__ == "__main__":
    watch(int(sys.argv[1]), sys.argv[2])
