"""The fork server: a process forked while the daemon has one thread (at its start, before the
store, the cache or FUSE open anything), which forks the decoding workers when the daemon asks.

A bare fork of the running daemon would copy its threads' locks in whatever state they were
(a worker could hang on a lock no thread will release); a fresh interpreter (spawn) may not be
reachable by the user the daemon serves as (`-o user=`, a Python under /root). The fork server
is neither: it holds no lock, and its children are copies of it, with every module the daemon
imported at its start (numpy, the codecs), so a worker starts in a millisecond and shares the
pages of those modules with the others.

It drops to the user the daemon serves as (for good: no saved root), keeps only its socket of
the file descriptors it inherited, ignores the terminal's signals, and dies with the daemon
(PR_SET_PDEATHSIG), as its workers die with it: no process of a mount outlives it.

A fork server that ends while the mount is up (killed: the OOM killer may choose it) is reaped
and `restarted`: by then the daemon runs threads, so the new one is a fresh interpreter
(`python -m zarrfs.array.decoding.server`, started with posix_spawn, which is safe beside
threads) that then does what the first one did. Where the daemon's user cannot run its Python
(a Python under /root, `-o user=nobody`), there is none: chunks decode in the daemon."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading
from dataclasses import dataclass

from ...codecs import one_thread_each
from . import wire, worker

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Drop:
    """The user (and groups) the fork server and its workers run as."""

    uid: int
    gid: int
    groups: tuple[int, ...]


class ForkServer:
    """The daemon's end: `fork_worker` gives a new worker's pid and socket."""

    def __init__(self, pid: int, sock: socket.socket, drop: Drop | None) -> None:
        self.pid = pid
        self._sock = sock
        self._drop = drop
        self._lock = threading.Lock()
        # (reaped the moment it ends, killed or closed: no zombie while the mount is up)
        self._reaper = threading.Thread(target=_reap, args=(pid,), name="zarrfs-reaper", daemon=True)
        self._reaper.start()

    @classmethod
    def start(cls, drop: Drop | None) -> ForkServer | None:
        """Forked now, if the daemon has one thread (else None: chunks decode in-process)."""
        if threading.active_count() != 1:
            return None
        daemon_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        daemon = os.getpid()
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                daemon_end.close()
                _become_server(server_end, daemon, drop)
                _serve_forks(server_end)
                status = 0
            finally:
                os._exit(status)
        server_end.close()
        return cls(pid, daemon_end, drop)

    def restarted(self) -> ForkServer:
        """This one ended (or is ended now, and reaped), and a new one started in a fresh
        interpreter (OSError: it could not be)."""
        if self._reaper.is_alive():  # (not yet reaped: the pid is still its own)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        self.close()
        daemon_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            drop = [] if self._drop is None else \
                [str(self._drop.uid), str(self._drop.gid), ",".join(map(str, self._drop.groups))]
            null = os.open(os.devnull, os.O_RDWR)
            try:
                pid = os.posix_spawn(sys.executable, [
                    sys.executable, "-m", __name__, str(os.getpid()), *drop,
                ], dict(os.environ), file_actions=[
                    (os.POSIX_SPAWN_DUP2, server_end.fileno(), SPAWNED_SOCKET),
                    *((os.POSIX_SPAWN_DUP2, null, standard) for standard in (0, 1, 2))])
            finally:
                os.close(null)
        except OSError:
            daemon_end.close()
            raise
        finally:
            server_end.close()
        return ForkServer(pid, daemon_end, self._drop)

    def fork_worker(self) -> tuple[int, socket.socket]:
        """A new worker: its pid and the daemon's end of its socket (OSError, wire.Closed:
        the fork server is gone)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with self._lock:
                wire.send(self._sock, ("fork",), fds=[theirs.fileno()])
                answer, _, _ = wire.receive(self._sock)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return int(answer[1]), ours

    def close(self) -> None:
        """The server ends (its workers with it, as their sockets close), and is reaped."""
        self._sock.close()
        self._reaper.join()


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


SPAWNED_SOCKET = 3  # (the descriptor of a restarted server's socket)


def main(args: list[str]) -> None:
    """A restarted fork server: `DAEMON_PID [UID GID GROUPS]`, its socket on descriptor 3."""
    drop = None if len(args) < 4 else \
        Drop(int(args[1]), int(args[2]), tuple(int(group) for group in args[3].split(",") if group))
    sock = socket.socket(fileno=SPAWNED_SOCKET)
    _become_server(sock, int(args[0]), drop)
    _serve_forks(sock)


def _become_server(sock: socket.socket, daemon: int, drop: Drop | None) -> None:
    _die_with_parent(daemon)
    _keep_only(sock.fileno())
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGPIPE"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)  # (the daemon decides when it ends)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # (ended workers are reaped by the kernel)
    one_thread_each()  # (its workers are forks of it: ready once here)
    if drop is not None:
        # (a server started again runs as the user already, without the right to set groups,
        # which it then need not: only root's saved ids are left to drop)
        if sorted(os.getgroups()) != sorted(drop.groups):
            os.setgroups(list(drop.groups))
        os.setresgid(drop.gid, drop.gid, drop.gid)
        os.setresuid(drop.uid, drop.uid, drop.uid)


def _serve_forks(sock: socket.socket) -> None:
    while True:
        try:
            _, _, fds = wire.receive(sock)
        except (wire.Closed, OSError):
            return
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                sock.close()
                _die_with_parent(os.getppid())
                worker.serve(socket.socket(fileno=fds[0]))
                status = 0
            finally:
                os._exit(status)
        os.close(fds[0])
        wire.send(sock, ("forked", pid))


def _die_with_parent(parent: int) -> None:
    """SIGKILL when the parent ends (checked once: it may have ended already)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


def _keep_only(keep: int) -> None:
    """Close every inherited descriptor but `keep` (the daemon's pipes, its log, FUSE's);
    the standard ones read from and write to /dev/null."""
    null = os.open(os.devnull, os.O_RDWR)
    for standard in (0, 1, 2):
        if standard != null:
            os.dup2(null, standard)
    os.closerange(3, keep)
    os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))


if __name__ == "__main__":
    main(sys.argv[1:])
