"""mount(8) and fstab: `mount -t fuse.zarrfs`, `mount -t zarrfs` and `mount --fstab` start the
commands scripts/install links, and the mounts read, write and unmount like any other.

    mount -t fuse.zarrfs SOURCE DIR -o OPTS  ->  mount.fuse3  ->  zarrfs SOURCE DIR -o OPTS
    mount -t zarrfs SOURCE DIR -o OPTS       ->  /sbin/mount.zarrfs SOURCE DIR -o OPTS

mount.fuse3 finds `zarrfs` on PATH and mount(8) finds `mount.zarrfs` in /sbin, so these
tests need /usr/local/bin/zarrfs and /sbin/mount.zarrfs; they fail, naming scripts/install,
when the links are missing. The commands run with the system PATH (not the virtualenv's),
as they would from a shell, systemd or fstab.
"""

from __future__ import annotations

import base64
import errno
import functools
import http.server
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorstore as ts

from tests.helpers.http_server import answering
from tests.helpers.mounting import without_views

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"
# What scripts/install links, and to what.
LINKS = {
    Path("/usr/local/bin/zarrfs"): VENV_BIN / "zarrfs",
    Path("/sbin/mount.zarrfs"): VENV_BIN / "mount.zarrfs",
}
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What systemd and fstab entries typically add; mount(8), mount.fuse3 and zarrfs must all
# accept them.
FSTAB_OPTIONS = "noauto,_netdev,x-systemd.automount,nofail,defaults"
INSTALL = "run `bash scripts/install` (as root) to create it"

SHAPE = (6, 10)
CHUNKS = (4, 4)
FILL = 7

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="mount(8) mounts entries without the `user` option only for root"
)


@pytest.fixture(autouse=True)
def installed() -> None:
    """The links scripts/install makes, and the FUSE tools it installs."""
    for link, target in LINKS.items():
        if not os.path.lexists(link):
            pytest.fail(f"{link} is missing: {INSTALL}")
        if os.path.realpath(link) != os.path.realpath(target):
            pytest.fail(f"{link} leads to {os.path.realpath(link)}, not {target}: {INSTALL}")
        if not os.access(link, os.X_OK):
            pytest.fail(f"{link} is not executable: {INSTALL}")
    for tool in ("mount.fuse3", "fusermount3", "mount", "umount"):
        if shutil.which(tool, path=SYSTEM_PATH) is None:
            pytest.fail(f"{tool} is not installed: run `bash scripts/install`")


# -- the array and the mount ---------------------------------------------------------------------


def _reference() -> np.ndarray:
    data = (np.arange(np.prod(SHAPE), dtype=np.uint32) * 2654435761 % 65521).astype("<u2")
    data = data.reshape(SHAPE)
    data[:4, :4] = FILL  # a chunk that is not stored
    return data


@pytest.fixture
def array(tmp_path: Path) -> Path:
    """A 6x10 uint16 array holding _reference(), written by TensorStore."""
    path = tmp_path / "array.zarr"
    metadata = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(SHAPE),
        "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(CHUNKS)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": FILL,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                   {"name": "zstd", "configuration": {"level": 1, "checksum": False}}],
    }
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)},
            "metadata": metadata}
    ts.open(spec, create=True).result().write(_reference()).result()
    return path


def _read_store(path: Path) -> np.ndarray:
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    return np.asarray(ts.open(spec, open=True).result().read().result())


def _run(*args: str | Path) -> None:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PATH": SYSTEM_PATH}, check=False)
    assert result.returncode == 0, (
        f"{' '.join(map(str, args))} exited with {result.returncode}:\n"
        f"{result.stdout}{result.stderr}"
    )


def _mount_entry(mountpoint: Path) -> tuple[str, str, list[str]] | None:
    """(source, type, options) of the mount on `mountpoint` in /proc/mounts (the topmost)."""
    found = None
    with open("/proc/mounts") as f:
        for line in f:
            source, target, fstype, options, *_ = (_unescape(field) for field in line.split())
            if target == str(mountpoint):
                found = (source, fstype, options.split(","))
    return found


def _unescape(field: str) -> str:
    return field.encode().decode("unicode_escape") if "\\" in field else field


def _daemons(mountpoint: Path) -> dict[int, list[str]]:
    """The live processes (not zombies) whose arguments name `mountpoint` and whose parent's do
    not: the daemon (its fork server and decoding processes, forks of it, are below it)."""
    found, parents = {}, {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            argv = Path(entry.path, "cmdline").read_bytes().decode(errors="replace").split("\0")
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if str(mountpoint) in argv and fields[0] not in "ZX":
            found[int(entry.name)], parents[int(entry.name)] = argv, int(fields[1])
    return {pid: argv for pid, argv in found.items() if parents[pid] not in found}


def _wait_for_exit(pids: Iterator[int] | list[int], timeout: float = 60.0) -> list[int]:
    """Wait until the processes are gone (a daemon exits once its final flush is done);
    the ones still alive."""
    alive = list(pids)
    deadline = time.monotonic() + timeout
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [pid for pid in alive if _is_alive(pid)]
    return alive


def _is_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in "ZX"


@pytest.fixture
def mountpoint(tmp_path: Path) -> Iterator[Path]:
    """An empty directory; whatever is mounted on it is unmounted after the test."""
    path = tmp_path / "mnt"
    path.mkdir()
    yield path
    daemons = list(_daemons(path))
    for command in (["umount", path], ["fusermount3", "-u", "-z", path]):
        if _mount_entry(path) is None:
            break
        subprocess.run([str(a) for a in command], capture_output=True, check=False,
                       env={**os.environ, "PATH": SYSTEM_PATH})
    for pid in _wait_for_exit(daemons, timeout=30):
        os.kill(pid, 9)  # a daemon this test started, stuck: do not leave it behind


# -- checks ---------------------------------------------------------------------------------------


def _check_mounted(mountpoint: Path, source: str, command: str, *, read_only: bool) -> list[int]:
    """The mount is zarrfs's, named after its source, started through `command`; its daemons."""
    entry = _mount_entry(mountpoint)
    assert entry is not None, f"nothing is mounted on {mountpoint}"
    shown, fstype, options = entry
    assert fstype == "fuse.zarrfs"
    assert shown == source
    assert ("ro" in options) == read_only, options
    daemons = _daemons(mountpoint)
    assert len(daemons) == 1, daemons
    (argv,) = daemons.values()
    assert command in argv, f"the daemon was not started through {command}: {argv}"
    return list(daemons)


def _check_reads(mountpoint: Path, expected: np.ndarray) -> None:
    assert without_views(os.listdir(mountpoint)) == ["chunks", "data", "zarr.json"]
    assert (mountpoint / "data").read_bytes() == expected.tobytes()
    chunk = np.full(CHUNKS, FILL, dtype="<u2")
    chunk[:2, :] = expected[4:, 4:8]
    assert (mountpoint / "chunks" / "c" / "1" / "1").read_bytes() == chunk.tobytes()


def _check_read_only(mountpoint: Path) -> None:
    with pytest.raises(OSError) as caught:
        os.open(mountpoint / "data", os.O_WRONLY)
    assert caught.value.errno == errno.EROFS


def _unmount(command: list[str | Path], mountpoint: Path, daemons: list[int]) -> None:
    _run(*command)
    assert _mount_entry(mountpoint) is None, f"{mountpoint} is still mounted"
    assert not _wait_for_exit(daemons), "the daemon did not exit after unmounting"


# -- mount -t -------------------------------------------------------------------------------------


def test_mount_type_fuse_zarrfs(array: Path, mountpoint: Path) -> None:
    _run("mount", "-t", "fuse.zarrfs", array, mountpoint, "-o", "ro")
    daemons = _check_mounted(mountpoint, str(array), "/usr/local/bin/zarrfs", read_only=True)
    _check_reads(mountpoint, _reference())
    _check_read_only(mountpoint)
    _unmount(["fusermount3", "-u", mountpoint], mountpoint, daemons)


def test_mount_type_zarrfs_with_fstab_options(array: Path, mountpoint: Path) -> None:
    _run("mount", "-t", "zarrfs", array, mountpoint, "-o", f"ro,{FSTAB_OPTIONS}")
    daemons = _check_mounted(mountpoint, str(array), "/sbin/mount.zarrfs", read_only=True)
    _check_reads(mountpoint, _reference())
    _check_read_only(mountpoint)
    _unmount(["umount", mountpoint], mountpoint, daemons)


# -- fstab ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("fstype", "command"), [("fuse.zarrfs", "/usr/local/bin/zarrfs"),
                                                 ("zarrfs", "/sbin/mount.zarrfs")])
def test_fstab_entry_mounts_read_write(fstype: str, command: str, array: Path, mountpoint: Path,
                                       tmp_path: Path) -> None:
    fstab = tmp_path / "fstab"
    fstab.write_text(f"# zarrfs test\n{array} {mountpoint} {fstype} {FSTAB_OPTIONS} 0 0\n")
    _run("mount", "--fstab", fstab, mountpoint)
    daemons = _check_mounted(mountpoint, str(array), command, read_only=False)
    expected = _reference()
    _check_reads(mountpoint, expected)

    # A write across chunks, starting inside an element; it is stored by the final flush at
    # the latest.
    offset = 2 * SHAPE[1] * 2 + 3
    payload = bytes(range(1, 30))
    fd = os.open(mountpoint / "data", os.O_WRONLY)
    try:
        assert os.pwrite(fd, payload, offset) == len(payload)
    finally:
        os.close(fd)
    raw = bytearray(expected.tobytes())
    raw[offset : offset + len(payload)] = payload
    expected = np.frombuffer(bytes(raw), dtype="<u2").reshape(SHAPE)
    assert (mountpoint / "data").read_bytes() == expected.tobytes()

    _unmount(["umount", mountpoint], mountpoint, daemons)
    assert np.array_equal(_read_store(array), expected)


# -- credentials ----------------------------------------------------------------------------------


class _Recorder(http.server.SimpleHTTPRequestHandler):
    """Serves a directory read-only and remembers the Authorization headers it was sent."""

    authorizations: list[str | None]

    def do_GET(self) -> None:
        self.authorizations.append(self.headers.get("Authorization"))
        super().do_GET()

    def do_HEAD(self) -> None:
        self.authorizations.append(self.headers.get("Authorization"))
        super().do_HEAD()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def http_root(array: Path) -> Iterator[tuple[str, list[str | None]]]:
    """An HTTP server on 127.0.0.1 serving the array's directory: (base URL without
    scheme, Authorization headers received)."""
    authorizations: list[str | None] = []
    handler = type("Handler", (_Recorder,), {"authorizations": authorizations})
    with answering(functools.partial(handler, directory=str(array.parent))) as port:
        yield f"127.0.0.1:{port}", authorizations


def test_proc_mounts_shows_the_source_without_credentials(
    array: Path, mountpoint: Path, http_root: tuple[str, list[str | None]]
) -> None:
    host, authorizations = http_root
    url = f"http://user:secret@{host}/{array.name}"
    _run("mount", "-t", "fuse.zarrfs", url, mountpoint, "-o", "ro")
    daemons = _check_mounted(mountpoint, f"http://{host}/{array.name}", "/usr/local/bin/zarrfs",
                             read_only=True)
    _check_reads(mountpoint, _reference())
    for table in ("/proc/mounts", "/proc/self/mountinfo"):
        assert "secret" not in Path(table).read_text(), table
    # The credentials were not dropped, only hidden: the requests carry them.
    assert f"Basic {base64.b64encode(b'user:secret').decode()}" in authorizations
    _unmount(["umount", mountpoint], mountpoint, daemons)
