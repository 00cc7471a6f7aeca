"""A zarrfs mount in a child process, always unmounted, with the daemon's peak RSS."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from .common import VENV_BIN, fmt_size, log, run_checked


def mounted(mp: Path) -> bool:
    target = os.path.realpath(mp)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 4 and parts[4].replace("\\040", " ") == target:
                return True
    return False


def proc_status(pid: int, key: str) -> int | None:
    """A `kB` field of /proc/<pid>/status, in bytes (None once the process is gone)."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return None


def descendants(pid: int) -> list[int]:
    """The processes below `pid` (its decoding processes, their fork server, its watchdog)."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError), open(f"/proc/{entry.name}/stat") as f:
                parents[int(entry.name)] = int(f.read().rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        below = [child for child, parent in parents.items() if parent in frontier]
        found += below
        frontier = below
    return found


def pss(pids: list[int]) -> int:
    """The proportional set size of these processes together, in bytes (a page shared by
    several counted once in all: the slabs in shared memory, the modules they all map)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, StopIteration), open(f"/proc/{pid}/smaps_rollup") as f:
            total += next(int(line.split()[1]) for line in f if line.startswith("Pss:")) * 1024
    return total


def proc_io(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/io") as f:
        return {k: int(v) for k, v in (line.split(":") for line in f)}


def daemon_counters(pid: int) -> tuple[float, int]:
    """CPU seconds (all threads, user + system) and minor page faults of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), int(fields[7])


def daemon_pid(mp: Path) -> int | None:
    """The pid of the daemon serving `mp` (a `zarrfs mount` started by us without -f)."""
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (d / "cmdline").read_bytes().split(b"\0")
                if b"mount" in argv and str(mp).encode() in argv:
                    return int(d.name)
    return None


def fusermount(mp: Path) -> None:
    """fusermount3 -u, retried while busy (a worker of ours may still be closing a file),
    lazily at last."""
    for _ in range(20):
        if not mounted(mp):
            return
        if subprocess.run(["fusermount3", "-u", str(mp)], capture_output=True).returncode == 0:
            return
        time.sleep(0.25)
    log(f"WARNING: {mp} busy, lazy unmount")
    subprocess.run(["fusermount3", "-u", "-z", str(mp)], capture_output=True)


def stop_daemon(pid: int, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Wait for the daemon (ours) to exit after its unmount; SIGTERM, then SIGKILL, if it
    will not. `proc` when it is our child (then it is reaped too)."""

    def exited(seconds: float) -> bool:
        if proc is not None:
            try:
                proc.wait(timeout=seconds)
                return True
            except subprocess.TimeoutExpired:
                return False
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if proc_status(pid, "VmRSS") is None:  # gone, or a zombie
                return True
            time.sleep(0.05)
        return False

    for sig, seconds in ((None, timeout), (signal.SIGTERM, 15.0), (signal.SIGKILL, 15.0)):
        if sig is not None:
            log(f"WARNING: daemon {pid} still running after unmount; {sig.name}")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        if exited(seconds):
            return


def unmount_daemon(mp: Path, pid: int | None, timeout: float = 60) -> None:
    """Unmount `mp` and wait for its daemon (not our child) to exit."""
    fusermount(mp)
    if pid is not None:
        stop_daemon(pid, timeout)


class MountError(RuntimeError):
    pass


class Mount:
    """`zarrfs mount SOURCE MP -f` in a child process (optionally under py-spy).

    Entering waits until the mount is in /proc/self/mountinfo and serves zarr.json; leaving
    always unmounts with fusermount3 -u and waits for the daemon to flush and exit (killing
    only our own child process if it will not). `peak_rss` is the daemon's VmHWM (and the
    highest VmRSS sampled every 50 ms, which also enforces `rss_limit`); `peak_pss`, the
    highest PSS of the daemon and every process below it together, sampled so."""

    active: list[Mount] = []

    def __init__(
        self,
        zarrfs: str,
        source: Path | str,
        mp: Path,
        opts: str = "",
        logfile: Path | None = None,
        exit_timeout: float = 180.0,
        rss_limit: int = 0,
    ) -> None:
        self.zarrfs, self.source, self.mp, self.opts = zarrfs, str(source), mp, opts
        self.rss_limit = rss_limit
        self.peak_rss = 0
        self.peak_pss = 0
        self.killed_for_rss: int | None = None
        self._stop_watch = threading.Event()
        self.logfile = logfile or mp.with_suffix(".log")
        self.exit_timeout = exit_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.spy: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None  # the daemon's pid
        self.unmount_seconds: float | None = None
        self.returncode: int | None = None

    def __enter__(self) -> Mount:
        self.mp.mkdir(parents=True, exist_ok=True)
        if mounted(self.mp):
            raise MountError(f"{self.mp} is already a mount point")
        cmd = [self.zarrfs, "mount", self.source, str(self.mp), "-f"]
        if self.opts:
            cmd += ["-o", self.opts]
        self._log = open(self.logfile, "ab")
        self._log.write(("\n$ " + " ".join(cmd) + "\n").encode())
        self._log.flush()
        self.proc = subprocess.Popen(
            cmd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        Mount.active.append(self)
        deadline = time.monotonic() + 30
        try:
            while not mounted(self.mp):
                if self.proc.poll() is not None:
                    raise MountError(f"zarrfs mount exited with {self.proc.returncode}: {self.log_tail()}")
                if time.monotonic() > deadline:
                    raise MountError(f"not mounted after 30 s: {self.log_tail()}")
                time.sleep(0.02)
            self.pid = self.proc.pid
            threading.Thread(target=self._watch_rss, daemon=True).start()
            # zarr.json must be served before we time anything.
            run_checked(["stat", "-c", "%s", str(self.mp / "zarr.json")], timeout=30)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is not None:
            # Something failed (a read timed out?): the daemon may be stuck, do not wait long.
            self.exit_timeout = min(self.exit_timeout, 15)
            if issubclass(exc_type, subprocess.TimeoutExpired):
                self.dump_stacks()
        self.close()
        if self.killed_for_rss:
            raise RuntimeError(
                f"daemon killed by the benchmark: RSS {fmt_size(self.killed_for_rss)}"
                f" > --rss-kill {fmt_size(self.rss_limit)}"
            )

    def _watch_rss(self) -> None:
        """Track the daemon's peak RSS; kill it (our own child) past --rss-kill, so that a
        leaking daemon cannot take the shared machine down."""
        proc, pid = self.proc, self.pid
        while not self._stop_watch.wait(0.05):
            if proc is None or pid is None or proc.poll() is not None:
                return
            rss = proc_status(pid, "VmRSS") or 0
            self.peak_rss = max(self.peak_rss, rss)
            self.peak_pss = max(self.peak_pss, pss([pid, *descendants(pid)]))
            if self.rss_limit and rss > self.rss_limit:
                log(f"ERROR: daemon {pid} RSS {fmt_size(rss)} > {fmt_size(self.rss_limit)}: killing it")
                self.killed_for_rss = rss
                proc.kill()
                return

    def start_profile(self, out: Path, native: bool = False) -> None:
        """Attach py-spy to the daemon (so start-up is not in the profile)."""
        # (native stacks need the process paused while sampled: py-spy refuses --nonblocking)
        cmd = [str(VENV_BIN / "py-spy"), "record", "--pid", str(self.pid)]
        cmd += ["-r", "200", "-f", "raw", "-o", str(out)] + (["--native"] if native else ["--nonblocking"])
        self.spy = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        time.sleep(1.5)  # let it attach
        if self.spy.poll() is not None:
            output = self.spy.stdout.read().decode() if self.spy.stdout else ""
            raise RuntimeError(f"py-spy exited: {output[-500:]}")

    def stop_profile(self) -> None:
        if self.spy is None:
            return
        self.spy.send_signal(signal.SIGINT)
        try:
            self.spy.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.spy.kill()
            self.spy.wait()
        self.spy = None

    def dump_stacks(self) -> None:
        """The daemon's Python stacks (py-spy dump, when installed) into its log: what it
        was doing when a request to it timed out."""
        spy = VENV_BIN / "py-spy"
        if self.pid is None or not spy.exists():
            return
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            r = subprocess.run([str(spy), "dump", "--pid", str(self.pid)], capture_output=True, timeout=60)
            self._log.write(b"\n--- py-spy dump after a timeout ---\n" + r.stdout + r.stderr)
            self._log.flush()
            log(f"daemon {self.pid} timed out: its stacks are in {self.logfile}")

    def log_tail(self, n: int = 1500) -> str:
        with contextlib.suppress(OSError):
            self._log.flush()
            return self.logfile.read_bytes()[-n:].decode(errors="replace").strip()
        return ""

    def close(self) -> None:
        if self.proc is None:
            return
        self.stop_profile()
        self._stop_watch.set()
        if self.pid is not None:
            self.peak_rss = max(self.peak_rss, proc_status(self.pid, "VmHWM") or 0)
        t0 = time.perf_counter()
        try:
            fusermount(self.mp)
            stop_daemon(self.proc.pid, self.exit_timeout, self.proc)
            if mounted(self.mp):  # the daemon died without unmounting
                subprocess.run(["fusermount3", "-u", "-z", str(self.mp)], capture_output=True)
        finally:
            self.unmount_seconds = time.perf_counter() - t0
            self.returncode = self.proc.returncode
            self.proc = None
            self._log.close()
            if self in Mount.active:
                Mount.active.remove(self)
