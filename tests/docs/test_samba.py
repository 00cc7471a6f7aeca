"""docs/clusters.md's Samba recipe ("Desktops that cannot mount"), served by a real smbd: its
`smb.conf` share, taken from the document, over a read-write mount of a group with
`allow_other`, files owned by the share's `force user` and a login user, two accounts of the
test's own (useradd; removed after the module). smbd listens on a free port of 127.0.0.1, with its
configuration, passdb, lock and state directories in a temporary directory, and is stopped
after the module; each test mounts its own group at the share's path and unmounts it.

smbclient reads the files byte for byte; smbprotocol does what smbclient cannot, as Windows
programs do: range writes into `data`, create-or-overwrite with the archive attribute, setting
times and attributes. Outcomes are checked through zarr-python on the store.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import smbclient
import zarr
from smbprotocol.exceptions import SMBOSError
from smbprotocol.file_info import FileAttributes
from smbprotocol.header import NtStatus

from tests.helpers.docs_examples import examples_of
from tests.helpers.mounting import mounted
from tests.helpers.s3_server import free_port

SMBD = shutil.which("smbd", path="/usr/sbin:/usr/bin:/sbin")
SMBCLIENT = shutil.which("smbclient")
pytestmark = pytest.mark.skipif(SMBD is None or SMBCLIENT is None,
                                reason="samba or smbclient missing (scripts/install installs them)")

PASSWORD = "zarrfs-test-password"
SHAPE, CHUNKS = (60, 80), (16, 32)
ROW = SHAPE[1] * 2  # bytes of a row of the uint16 array `a`


def recipe() -> tuple[str, str]:
    """The share of docs/clusters.md: its name and its lines."""
    [share] = [e.text for e in examples_of("docs/clusters.md")
               if e.language == "ini" and "force user" in e.text]
    name, _, body = share.partition("\n")
    return name.strip("[]"), body


@dataclass
class Samba:
    port: int
    user: str  # who logs in
    owner: int  # the share's force user: the uid (and gid) the mount gives its files
    share: str
    mountpoint: Path
    base: Path
    conf: Path

    def unc(self, name: str = "") -> str:
        return rf"\\127.0.0.1\{self.share}" + "".join(rf"\{part}" for part in name.split("/") if part)

    def client(self, commands: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(SMBCLIENT), f"//127.0.0.1/{self.share}", "-p", str(self.port), "-s",
                               str(self.conf), "-U", f"{self.user}%{PASSWORD}", "-c", commands],
                              capture_output=True, text=True, timeout=120, check=False)


def run(*command: str, stdin: str = "") -> None:
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"


@contextlib.contextmanager
def account(role: str) -> Iterator[str]:
    """A user (and its group) of the test's own, as `zarr` and `alice` of the recipe are.
    (Not `nobody`: Samba's guest account, which its access checks treat apart.)"""
    name = f"zarrfs-{role}-{uuid.uuid4().hex[:8]}"
    run("useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", name)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], capture_output=True, timeout=60, check=False)


def configuration(base: Path, port: int, user: str, owner: str, mountpoint: Path) -> str:
    """A [global] section keeping everything of this smbd in `base`, then the documented share
    with the test's mountpoint and users."""
    name, share = recipe()
    share = (share.replace("path = /mnt/era5", f"path = {mountpoint}")
             .replace("valid users = alice bob", f"valid users = {user}")
             .replace("force user = zarr", f"force user = {owner}"))
    assert str(mountpoint) in share and user in share and owner in share, share
    places = {"private dir": "private", "lock directory": "lock", "state directory": "state",
              "cache directory": "cache", "pid directory": "pid", "ncalrpc dir": "ncalrpc"}
    for place in places.values():
        (base / place).mkdir()
    lines = [f"   {key} = {base / place}" for key, place in places.items()]
    return "\n".join([
        "[global]", "   server role = standalone server", f"   smb ports = {port}",
        "   interfaces = 127.0.0.1", "   bind interfaces only = yes", *lines,
        f"   log file = {base / 'smbd.log'}", f"   passdb backend = tdbsam:{base / 'private' / 'passdb.tdb'}",
        "   load printers = no", "   printing = bsd", "   printcap name = /dev/null",
        "   disable spoolss = yes",
        "", f"[{name}]", share])


def wait_for_port(port: int, smbd: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert smbd.poll() is None, f"smbd exited: {log.read_text(errors='replace')}"
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.1)
    raise AssertionError(f"smbd does not listen on {port}: {log.read_text(errors='replace')}")


def stop(smbd: subprocess.Popen[bytes]) -> None:
    """smbd and its children (their own process group, made for them here)."""
    for signum, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 20)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(smbd.pid, signum)
        with contextlib.suppress(subprocess.TimeoutExpired):
            smbd.wait(timeout=wait)
            return


@pytest.fixture(scope="module")
def samba() -> Iterator[Samba]:
    # Not below pytest's temporary directory: that is root's alone, and Samba acts as nobody.
    base = Path(tempfile.mkdtemp(prefix="zarrfs-samba-", dir="/tmp"))
    base.chmod(0o755)
    port = free_port()
    with account("smb") as user, account("owner") as owner:
        conf = base / "smb.conf"
        conf.write_text(configuration(base, port, user, owner, base / "share"))
        run("smbpasswd", "-c", str(conf), "-s", "-a", user, stdin=f"{PASSWORD}\n{PASSWORD}\n")
        log = base / "smbd.out"
        with open(log, "wb") as out:
            smbd = subprocess.Popen([str(SMBD), "--foreground", "--no-process-group", "-s", str(conf)],
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for_port(port, smbd, log)
            yield Samba(port, user, int(subprocess.check_output(["id", "-u", owner], timeout=30)),
                        recipe()[0], base / "share", base, conf)
        finally:
            stop(smbd)
    if subprocess.run(["mountpoint", "-q", str(base / "share")], timeout=30).returncode != 0:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def share(samba: Samba) -> Iterator[tuple[Samba, Path, np.ndarray]]:
    """A group holding the uint16 array `a`, mounted read-write at the share's path: the share,
    the group's store path and `a`'s values."""
    source = samba.base / f"group-{uuid.uuid4().hex[:8]}.zarr"
    values = (np.arange(np.prod(SHAPE)) % 65521).astype("<u2").reshape(SHAPE)
    group = zarr.open_group(str(source), mode="w")
    group.create_array("a", shape=SHAPE, chunks=CHUNKS, dtype="<u2")[...] = values
    ids = [f"uid={samba.owner}", f"gid={samba.owner}"]  # (its group has its name and number)
    with mounted(source, samba.mountpoint, ["rw", "allow_other", *ids]):
        smbclient.register_session("127.0.0.1", username=samba.user, password=PASSWORD, port=samba.port,
                                   auth_protocol="ntlm")
        try:
            yield samba, source, values
        finally:
            smbclient.reset_connection_cache()  # (before the unmount: a session holds the share open)


def stored(source: Path, name: str = "a") -> np.ndarray:
    return np.asarray(zarr.open_array(str(source / name), mode="r")[...])


def refused(action: object) -> bool:
    """Whether the SMB call `action()` was refused with STATUS_ACCESS_DENIED."""
    try:
        action()  # type: ignore[operator]
    except SMBOSError as e:
        return e.ntstatus == NtStatus.STATUS_ACCESS_DENIED  # type: ignore[no-any-return]
    return False


def test_smbclient_reads_the_files_byte_for_byte(share: tuple[Samba, Path, np.ndarray],
                                                 tmp_path: Path) -> None:
    samba, _, values = share
    names = ["a/data", "a/data.tif", "a/data.h5", "a/data.npy", "data.h5", "data.nc"]
    gets = "; ".join(f"get {name} {tmp_path / name.replace('/', '_')}" for name in names)
    done = samba.client(gets)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in names:
        got = (tmp_path / name.replace("/", "_")).read_bytes()
        assert got == (samba.mountpoint / name).read_bytes(), name
    assert (tmp_path / "a_data").read_bytes() == values.tobytes()


def test_a_range_write_through_the_share_is_stored(share: tuple[Samba, Path, np.ndarray]) -> None:
    samba, source, values = share
    row = np.arange(1000, 1000 + SHAPE[1] - 10, dtype="<u2")
    with smbclient.open_file(samba.unc("a/data"), mode="r+b", port=samba.port) as f:
        f.seek(17 * ROW + 5 * 2)  # (row 17 from element 5: across the chunk boundaries of both axes)
        f.write(row.tobytes())
    expected = values.copy()
    expected[17, 5:SHAPE[1] - 5] = row
    np.testing.assert_array_equal(stored(source), expected)
    with smbclient.open_file(samba.unc("a/data"), mode="rb", port=samba.port) as f:
        f.seek(17 * ROW)
        assert f.read(ROW) == expected[17].tobytes()


def test_overwriting_data_truncates_then_grows_the_array(share: tuple[Samba, Path, np.ndarray]) -> None:
    """A copy onto `data`: create-or-overwrite with the archive attribute, as Windows opens it."""
    samba, source, values = share
    new = (values[::-1] // 3).astype("<u2")
    with smbclient.open_file(samba.unc("a/data"), mode="wb", port=samba.port,
                             file_attributes=FileAttributes.FILE_ATTRIBUTE_ARCHIVE) as f:
        f.write(new.tobytes())
    np.testing.assert_array_equal(stored(source), new)
    with smbclient.open_file(samba.unc("a/data"), mode="wb", port=samba.port) as f:
        f.write(new[:25].tobytes())  # a shorter file: 25 rows
    np.testing.assert_array_equal(stored(source), new[:25])
    assert smbclient.stat(samba.unc("a/data"), port=samba.port).st_size == 25 * ROW


def test_saves_through_a_temporary_file_and_attributes_are_refused_times_kept(
        share: tuple[Samba, Path, np.ndarray]) -> None:
    samba, source, values = share

    def save_as() -> None:
        with smbclient.open_file(samba.unc("a/~data.tmp"), mode="wb", port=samba.port) as f:
            f.write(values.tobytes())

    assert refused(save_as)
    assert refused(lambda: smbclient.rename(samba.unc("a/data"), samba.unc("a/data.bak"), port=samba.port))
    assert refused(lambda: smbclient.remove(samba.unc("a/data"), port=samba.port))
    done = samba.client("setmode a/data +r; setmode a/data +a")
    assert done.stdout.count("NT_STATUS_ACCESS_DENIED") == 2, done.stdout + done.stderr
    smbclient.utime(samba.unc("a/data"), times=(1_000_000_000, 1_000_000_000), port=samba.port)
    assert (samba.mountpoint / "a" / "data").stat().st_mtime == 1_000_000_000  # (shown while mounted)
    np.testing.assert_array_equal(stored(source), values)
    assert sorted(p.name for p in (samba.mountpoint / "a").iterdir() if not p.name.startswith("data")) == [
        "chunks", "zarr.json"]


def test_attributes_and_file_ids(share: tuple[Samba, Path, np.ndarray]) -> None:
    """Views read-only (`map readonly`), `data` not; file IDs are the inode numbers."""
    samba, _, _ = share
    for name, read_only in (("a/data", False), ("a/data.tif", True), ("a/data.h5", True), ("data.nc", True)):
        info = smbclient.stat(samba.unc(name), port=samba.port)
        assert bool(info.st_file_attributes & FileAttributes.FILE_ATTRIBUTE_READONLY) == read_only, name
        assert info.st_ino == (samba.mountpoint / name).stat().st_ino, name


def test_npy_files_and_directories_make_arrays_and_groups(share: tuple[Samba, Path, np.ndarray],
                                                         tmp_path: Path) -> None:
    samba, source, _ = share
    x = np.arange(12, dtype="<i4").reshape(3, 4)
    np.save(tmp_path / "x.npy", x)
    done = samba.client(f"put {tmp_path / 'x.npy'} x.npy; mkdir sub")
    assert done.returncode == 0 and "NT_STATUS" not in done.stdout, done.stdout + done.stderr
    np.testing.assert_array_equal(stored(source, "x"), x)
    assert zarr.open_group(str(source / "sub"), mode="r").attrs.asdict() == {}
