"""`-o user=NAME`: root mounts, then the daemon does every store access as NAME. A chunk NAME
may not read fails its read (EIO) for every reader; what the mount writes belongs to NAME;
`zarrfs stats` names the user; NAME owns the mount (the daemon unmounts itself at SIGTERM)."""

from __future__ import annotations

import errno
import grp
import json
import os
import re
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import ZARRFS, is_mounted, mounted
from tests.helpers.trust_helpers import NOBODY, public, read_as
from zarrfs.options import MountOptions, OptionError

__all__ = ["public"]  # (the fixture, used by name)

PAGE = 4096  # a chunk a page: a write of one chunk's page reads no other chunk
VALUES = np.arange(3 * PAGE, dtype="u2").astype("u1")


def nobodys_store(public: Path) -> Path:
    """An array of three one-page chunks, in directories nobody owns: chunk `c/0` not stored
    (it is written through the mount), `c/1` root's alone (0600)."""
    store = public / "a.zarr"
    zarr.create_array(str(store), shape=VALUES.shape, chunks=(PAGE,), dtype="u1",
                      compressors=None, fill_value=0)[...] = VALUES
    (store / "c" / "0").unlink()
    for directory, _, files in os.walk(store):
        for path in [directory, *(os.path.join(directory, f) for f in files)]:
            os.chown(path, NOBODY.pw_uid, NOBODY.pw_gid)
    secret = store / "c" / "1"
    os.chown(secret, 0, 0)
    secret.chmod(0o600)
    return store


def ids_of(pid: int) -> tuple[list[str], list[str]]:
    """The real, effective, saved and filesystem uids and gids of process `pid`."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return fields["Uid"].split(), fields["Gid"].split()


@pytest.mark.fast
def test_the_daemon_serves_as_the_user_it_names(public: Path) -> None:
    store = nobodys_store(public)
    options = ["rw", "allow_other", "user=nobody", "readahead=512"]
    with mounted(store, public / "mnt", options) as mount:
        uids, gids = ids_of(mount.process.pid)
        assert uids == [str(NOBODY.pw_uid)] * 4 and gids == [str(NOBODY.pw_gid)] * 4
        # What serving needs of root was taken before root was given up: the kernel's readahead.
        mount.wait_for_log("mounted")
        assert _readahead_kb(mount.path) == 512
        # A chunk nobody may not read: EIO, whoever reads through the mount.
        assert read_as(mount.chunk("c/1"), None) == errno.EIO
        assert read_as(mount.chunk("c/1")) == errno.EIO
        assert any("'c/1'" in line and "nobody" in line for line in mount.log().splitlines())
        assert read_as(mount.chunk("c/2")) == VALUES[2 * PAGE :].tobytes()
        # What the mount writes belongs to nobody.
        fd = os.open(mount.data, os.O_WRONLY)
        try:
            os.pwrite(fd, bytes(range(256)) * (PAGE // 256), 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        written = store / "c" / "0"
        assert (written.stat().st_uid, written.stat().st_gid) == (NOBODY.pw_uid, NOBODY.pw_gid)
        assert zarr.open_array(str(store))[:PAGE].tobytes() == bytes(range(256)) * (PAGE // 256)
        shown = subprocess.run([ZARRFS, "stats", str(mount.path), "--json"], capture_output=True,
                               text=True, timeout=60, check=True)
        stats = json.loads(shown.stdout)
        assert stats["user"] == "nobody" and stats["uid"] == NOBODY.pw_uid
        assert isinstance(stats["uid"], int) and isinstance(stats["gid"], int)  # (ids, not 65534.000)
        text = subprocess.run([ZARRFS, "stats", str(mount.path)], capture_output=True, text=True,
                              timeout=60, check=True).stdout
        assert re.search(rf"^uid:\s+{NOBODY.pw_uid}$", text, re.M), text
        # The mount is nobody's: the daemon unmounts it itself at SIGTERM.
        assert f"user_id={NOBODY.pw_uid}," in _mount_line(mount.path)
        mount.process.send_signal(signal.SIGTERM)
        assert mount.process.wait(timeout=60) == 0, mount.log()
        assert not is_mounted(mount.path), mount.log()  # (by the daemon, not by root after it)


def test_without_allow_other_the_mount_is_the_users_alone(public: Path) -> None:
    """NAME owns the mount, as if NAME had made it: only NAME may use it, and NAME's
    fusermount3 -u unmounts it (the daemon forked, as fstab and mount(8) run it)."""
    store, mountpoint = nobodys_store(public), public / "mnt"
    mountpoint.mkdir()
    options = f"ro,user=nobody,log={public / 'log'}"
    subprocess.run([ZARRFS, "mount", str(store), str(mountpoint), "-o", options], check=True, timeout=60)
    try:
        with pytest.raises(PermissionError):
            os.stat(mountpoint)  # (root, not the mount's user)
        assert read_as(mountpoint / "chunks" / "c" / "2") == VALUES[2 * PAGE :].tobytes()
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True, timeout=60,
                       user=NOBODY.pw_uid, group=NOBODY.pw_gid, extra_groups=[])
        assert not is_mounted(mountpoint)
    finally:
        if is_mounted(mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], timeout=60)


def test_group_names_the_daemons_group(public: Path) -> None:
    store = nobodys_store(public)
    group = grp.getgrgid(0).gr_name  # (a group other than nobody's own)
    with mounted(store, public / "mnt", ["ro", "allow_other", "user=nobody", f"group={group}"]) as mount:
        uids, gids = ids_of(mount.process.pid)
        assert uids == [str(NOBODY.pw_uid)] * 4 and gids == ["0"] * 4
        assert read_as(mount.chunk("c/2")) == VALUES[2 * PAGE :].tobytes()


def test_a_number_without_an_entry_is_taken_as_it_is(public: Path) -> None:
    """A container's consumers run as a uid its /etc/passwd may not name."""
    store = nobodys_store(public)
    with mounted(store, public / "mnt", ["ro", "allow_other", "user=4242"]) as mount:
        assert ids_of(mount.process.pid) == (["4242"] * 4, ["4242"] * 4)
        assert read_as(mount.chunk("c/2")) == VALUES[2 * PAGE :].tobytes()


def test_an_unknown_user_fails_the_mount(public: Path) -> None:
    store = nobodys_store(public)
    with pytest.raises(AssertionError) as failed, mounted(store, public / "mnt", ["user=no-such-user"]):
        pass
    assert "-o user=no-such-user: no such user" in str(failed.value)


@pytest.mark.fast
def test_group_alone_is_refused() -> None:
    assert MountOptions.parse(["user=nobody,group=nogroup"]).group == "nogroup"
    with pytest.raises(OptionError, match="group= needs user="):
        MountOptions.parse(["group=nogroup"])


def _readahead_kb(path: Path) -> int:
    device = _mount_line(path, "/proc/self/mountinfo", 4).split()[2]
    return int(Path(f"/sys/class/bdi/{device}/read_ahead_kb").read_text())


def _mount_line(path: Path, table: str = "/proc/self/mounts", field: int = 1) -> str:
    with open(table) as f:
        return [line for line in f if line.split()[field] == str(path)][-1]
