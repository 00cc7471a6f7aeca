"""Security between users of a mount.

(a) With allow_other the kernel enforces the file modes (default_permissions comes with it):
    umask=077 keeps other users out, umask=022 lets them read but not write.
(b) An unprivileged user can run the daemon, mount, read, write and unmount with fusermount3.

Tests that need root (creating a throwaway user, chmod of /dev/fuse) skip without it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pickle
import re
import secrets
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.mounting import is_mounted, mounted, without_views
from tests.helpers.security_arrays import SHAPE, VALUES, create_array, errno_of, pwrite, read_array

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)


VENV_BIN = Path(sys.executable).parent


# -- running things as another user -----------------------------------------------------------


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (creates a user, mounts with allow_other)")
    for tool in ("useradd", "userdel", "runuser"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool}")


def user_pids(uid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    pids.append(int(entry))
    return pids


@pytest.fixture(scope="module")
def user() -> Iterator[User]:
    """A throwaway user with no home and no shell; deleted at the end with its processes."""
    needs_root()
    name = f"zarrfs-test-{secrets.token_hex(4)}"
    subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", name], check=True,
                   capture_output=True)
    try:
        info = subprocess.run(["id", "-u", name], check=True, capture_output=True, text=True)
        gid = subprocess.run(["id", "-g", name], check=True, capture_output=True, text=True)
        yield User(name, int(info.stdout), int(gid.stdout))
    finally:
        uid = int(subprocess.run(["id", "-u", name], capture_output=True, text=True).stdout
                  or -1)
        for pid in user_pids(uid) if uid >= 0 else []:  # only this test's user: ours
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for _ in range(50):
            if subprocess.run(["userdel", name], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"could not delete the test user {name}")


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every user may traverse (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="zarrfs-security-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            target = line.split()[1]
            if target.startswith(str(path) + "/"):
                subprocess.run(["fusermount3", "-u", "-z", target], capture_output=True)
        shutil.rmtree(path, ignore_errors=True)


def as_user(user: User, action: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Run `action` in a forked child with the user's ids (no supplementary groups, so no
    capabilities either). Returns its result, or the errno it failed with as ("errno", n)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: set the ids, act, report, leave without cleaning up
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(user.gid)
            os.setuid(user.uid)
            try:
                result: Any = ("ok", action())
            except OSError as e:
                result = ("errno", e.errno)
            payload = pickle.dumps(result)
        except BaseException as e:
            payload = pickle.dumps(("crash", repr(e)))
        with contextlib.suppress(BaseException):
            os.write(write_end, payload)
        os._exit(0)
    os.close(write_end)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            ready, _, _ = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                raise AssertionError(f"as_user: no answer within {timeout} s")
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    kind, value = pickle.loads(b"".join(chunks))
    if kind == "crash":
        raise AssertionError(f"as_user: the child failed: {value}")
    return value if kind == "ok" else ("errno", value)


def read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def open_file(path: str, flags: int) -> str:
    os.close(os.open(path, flags, 0o644))
    return "opened"


def denied(result: Any) -> bool:
    return result == ("errno", errno.EACCES)


# -- (b) allow_other and the kernel's permission checks ---------------------------------------


@pytest.mark.parametrize("options", [(), ("allow_other", "umask=077"), ("allow_other", "umask=022")],
                         ids=["private", "allow_other-umask077", "allow_other-umask022"])
def test_other_users_get_what_the_modes_allow(
    user: User, shared_dir: Path, options: tuple[str, ...]
) -> None:
    root = shared_dir / "array"
    create_array(root)
    with mounted(root, shared_dir / "mnt", options) as mount:
        mp = str(mount.path)
        data = f"{mp}/data"
        with open("/proc/self/mounts") as f:
            entry = next(line for line in f if line.split()[1] == mp)
        mount_options = set(entry.split()[3].split(","))
        if "allow_other" in options:
            assert {"allow_other", "default_permissions"} <= mount_options, entry
        results = {
            "stat root": as_user(user, lambda: os.stat(mp).st_mode),
            "list root": as_user(user, lambda: sorted(os.listdir(mp))),
            "read data": as_user(user, lambda: read_file(data)),
            "read chunk": as_user(user, lambda: read_file(f"{mp}/chunks/c/1/0")),
            "open data for writing": as_user(user, lambda: open_file(data, os.O_WRONLY)),
            "open chunk read-write": as_user(user, lambda: open_file(f"{mp}/chunks/c/0/0",
                                                                     os.O_RDWR)),
            "create": as_user(user, lambda: open_file(f"{mp}/chunks/new",
                                                      os.O_CREAT | os.O_WRONLY)),
        }
        # The owner (root here) keeps full access whatever others get.
        assert read_file(data) == VALUES.tobytes()
        assert open_file(data, os.O_WRONLY) == "opened"
    if "umask=022" in options:
        assert results["stat root"] == stat.S_IFDIR | 0o755
        assert without_views(results["list root"]) == ["chunks", "data", "zarr.json"]
        assert results["read data"] == VALUES.tobytes()
        assert results["read chunk"] == VALUES[8:, :8].tobytes()
        for what in ("open data for writing", "open chunk read-write", "create"):
            assert denied(results[what]), (what, results[what])
    else:
        # Without allow_other FUSE refuses every other user, even a stat of the root; with
        # umask=077 the root directory is 0700, so nothing below it can be reached.
        for what, result in results.items():
            if what == "stat root" and options:
                assert result == stat.S_IFDIR | 0o700
            else:
                assert denied(result), (what, result)


# -- (c) an unprivileged user runs the daemon --------------------------------------------------


@dataclass
class Restore:
    path: str
    mode: int


@pytest.fixture
def fuse_for_users(user: User) -> Iterator[None]:
    """Let other users open /dev/fuse and run the venv's python (which may live under /root),
    for this test only: the modes are put back afterwards."""
    changes: list[Restore] = []
    try:
        mode = stat.S_IMODE(os.stat("/dev/fuse").st_mode)
        if mode & 0o006 != 0o006:
            changes.append(Restore("/dev/fuse", mode))
            os.chmod("/dev/fuse", mode | 0o666)
        python = Path(os.path.realpath(sys.executable))
        for directory in [*reversed(python.parents), *Path(sys.prefix).parents]:
            mode = stat.S_IMODE(os.stat(directory).st_mode)
            if mode & 0o001 == 0 and all(c.path != str(directory) for c in changes):
                changes.append(Restore(str(directory), mode))
                os.chmod(directory, mode | 0o001)
        probe = subprocess.run(["runuser", "-u", user.name, "--", sys.executable, "-c",
                                "import zarrfs.daemon.run, pyfuse3"],
                               capture_output=True, text=True, timeout=60)
        if probe.returncode != 0:
            pytest.skip(f"{user.name} cannot run {sys.executable} with zarrfs even with "
                        f"o+x on its directories: {probe.stderr.strip()[-300:]}")
        yield
    finally:
        for change in reversed(changes):
            os.chmod(change.path, change.mode)


def daemon_pid(log: Path) -> int:
    match = re.search(r"zarrfs\[(\d+)\]", log.read_text(errors="replace"))
    assert match, f"no pid in the daemon log:\n{log.read_text(errors='replace')}"
    return int(match.group(1))


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_an_unprivileged_user_mounts_reads_writes_and_unmounts(
    user: User, shared_dir: Path, fuse_for_users: None
) -> None:
    home = shared_dir / "home"
    home.mkdir()
    root, mountpoint, log = home / "array", home / "mnt", home / "zarrfs.log"
    create_array(root)
    mountpoint.mkdir()
    subprocess.run(["chown", "-R", f"{user.uid}:{user.gid}", str(home)], check=True)

    done = subprocess.run(["runuser", "-u", user.name, "--", str(VENV_BIN / "zarrfs"), "mount",
                           str(root), str(mountpoint), "-o", f"log={log}"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    pid = daemon_pid(log)
    try:
        with open("/proc/self/mounts") as f:
            entry = next(line for line in f if line.split()[1] == str(mountpoint))
        assert f"user_id={user.uid}" in entry, entry
        with open(f"/proc/{pid}/status") as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
        assert status["Uid"].split() == [str(user.uid)] * 4
        assert int(status["CapEff"], 16) == 0

        data = str(mountpoint / "data")
        assert as_user(user, lambda: read_file(data)) == VALUES.tobytes()
        row = np.arange(16, dtype="<i4") - 1000
        assert as_user(user, lambda: pwrite(data, row.tobytes(), 16 * 4 * 5)) is None
        back = as_user(user, lambda: read_file(data))
        assert np.array_equal(np.frombuffer(back, "<i4").reshape(SHAPE)[5], row)
        # A mount without allow_other is its owner's alone: even root is turned away.
        assert errno_of(lambda: os.stat(mountpoint)) == errno.EACCES

        done = subprocess.run(["runuser", "-u", user.name, "--", "fusermount3", "-u",
                               str(mountpoint)], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        deadline = time.monotonic() + 20
        while running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(pid), "the daemon did not exit after fusermount3 -u"
    finally:
        if is_mounted(mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], capture_output=True)
    expected = VALUES.copy()
    expected[5] = row
    assert np.array_equal(read_array(root), expected)
    assert (root / "c" / "0" / "0").stat().st_uid == user.uid  # written by the user's daemon
    assert "mounted" in log.read_text() and "unmounted" in log.read_text()
