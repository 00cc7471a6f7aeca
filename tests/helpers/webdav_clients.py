"""Real WebDAV clients of `zarrfs serve` for tests (tests/serve/): rclone, configured by
environment alone, with the requests it sent as it reports them (`--dump headers`); and
davfs2, the kernel's WebDAV filesystem, mounting a server as root with a configuration of
the test's own, always unmounted.

davfs2 works in its cache directory as its own user (`davfs2`), who cannot pass pytest's
directories (mode 0700): its cache is a directory of its own under /tmp, removed after."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.mounting import is_mounted

DAVFS = shutil.which("mount.davfs", path="/usr/sbin:/sbin:/usr/bin")
DAVFS_PIDS = Path("/var/run/mount.davfs")  # (where mount.davfs says its pid, by mountpoint)
CLIENT_SECONDS = 120.0  # (a loaded 2-core machine)

REQUEST = re.compile(r"HTTP REQUEST \(req (\w+)\)\n[^\n]*DEBUG : (\S+) (\S+) HTTP/1\.\d\n")
ANSWER = re.compile(r"HTTP RESPONSE \(req (\w+)\)\n[^\n]*DEBUG : HTTP/1\.\d (\d{3})")


def rclone_env(url: str) -> dict[str, str]:
    """The remote `z:`, the server at `url` (no configuration file)."""
    return {**os.environ, "RCLONE_CONFIG_Z_TYPE": "webdav", "RCLONE_CONFIG_Z_URL": url,
            "RCLONE_CONFIG_Z_VENDOR": "other", "RCLONE_CONFIG": "/dev/null"}


def rclone(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["rclone", *args], capture_output=True, text=True,
                          timeout=CLIENT_SECONDS, env=rclone_env(url))


@dataclass(frozen=True)
class Exchange:
    """A request rclone sent, and the status it got (0: none)."""
    method: str
    path: str
    status: int


def rclone_sent(url: str, *args: str) -> tuple[subprocess.CompletedProcess[str], list[Exchange]]:
    """rclone's run, and the requests it sent, in order, as it dumped them."""
    done = rclone(url, "--dump", "headers", *args)
    statuses = {req: int(status) for req, status in ANSWER.findall(done.stderr)}
    return done, [Exchange(method, path, statuses.get(req, 0))
                  for req, method, path in REQUEST.findall(done.stderr)]


def davfs2_conf(path: Path, cache: Path) -> Path:
    path.write_text("ask_auth 0\n"  # (no credentials asked on a terminal)
                    "use_locks 1\n"  # (the default, said: LOCK, PUT with If, UNLOCK)
                    f"cache_dir {cache}\n"
                    "delay_upload 0\n"  # (a file is sent when it is closed)
                    # (davfs2 1.6 lists no directory on Linux 6.16 and later with its default of
                    # 16 KiB: EINVAL; its upstream's advice, alisarctl/davfs2#22)
                    "buf_size 64\n")
    return path


@dataclass
class DavMount:
    path: Path
    pid: int | None  # mount.davfs (it runs as a daemon: no child of the test)

    def unmount(self) -> None:
        """umount(8), which returns once mount.davfs has sent what was written and exited."""
        done = subprocess.run(["umount", str(self.path)], capture_output=True, text=True,
                              timeout=CLIENT_SECONDS)
        assert done.returncode == 0, done.stderr
        assert not is_mounted(self.path)
        assert self.pid is None or not running(self.pid), "umount returned before mount.davfs exited"


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@contextlib.contextmanager
def davfs2_mounted(url: str, where: Path) -> Iterator[DavMount]:
    """The server at `url` mounted read-write by davfs2 at `where` (as root)."""
    cache = Path(tempfile.mkdtemp(prefix="zarrfs-davfs2-"))
    shutil.chown(cache, group="davfs2")
    cache.chmod(0o775)
    where.mkdir()
    conf = davfs2_conf(cache / "davfs2.conf", cache)
    mount = DavMount(where, None)
    try:
        done = subprocess.run(["mount", "-t", "davfs", url, str(where), "-o", f"rw,conf={conf}"],
                              capture_output=True, text=True, timeout=CLIENT_SECONDS)
        assert done.returncode == 0 and is_mounted(where), done.stderr
        said = DAVFS_PIDS / (str(where.resolve()).strip("/").replace("/", "-") + ".pid")
        mount.pid = int(said.read_text()) if said.exists() else None
        yield mount
    finally:
        leave(mount)
        shutil.rmtree(cache, ignore_errors=True)


def leave(mount: DavMount) -> None:
    """No mount left behind, and no mount.davfs: umount, a lazy one, then its pid signalled."""
    for line in (["umount", str(mount.path)], ["umount", "-l", str(mount.path)]):
        if is_mounted(mount.path):
            with contextlib.suppress(subprocess.TimeoutExpired):
                subprocess.run(line, capture_output=True, timeout=CLIENT_SECONDS)
    if mount.pid is None or not running(mount.pid):
        return
    os.kill(mount.pid, signal.SIGTERM)
    deadline = time.monotonic() + CLIENT_SECONDS
    while running(mount.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if running(mount.pid):
        os.kill(mount.pid, signal.SIGKILL)
