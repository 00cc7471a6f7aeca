"""Security properties of a mount.

(a) No name a user can pass reaches a store key outside the array: the views layer resolves
    only the canonical names of its nodes, and through a real mount (over a recording
    `faulty://` store) every store call stays inside the array directory.
(b) With allow_other the kernel enforces the file modes (default_permissions comes with it):
    umask=077 keeps other users out, umask=022 lets them read but not write.
(c) An unprivileged user can run the daemon, mount, read, write and unmount with fusermount3.
(d) Credentials never show in argv, /proc/mounts or the daemon's log, and are refused as
    mount options.

Tests that need root (creating a throwaway user, chmod of /dev/fuse) skip without it.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import glob
import http.server
import json
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
from fsspec.implementations.local import LocalFileSystem
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.faulty_fs import CONFIG_ENV, child_env, read_counters, write_config
from tests.helpers.http_server import answering
from tests.helpers.mounting import ZARRFS, is_mounted, mounted, without_views
from tests.helpers.s3_server import S3Server
from zarrfs import array_metadata
from zarrfs.array import Shared
from zarrfs.cli import main as zarrfs_main
from zarrfs.formats import ChunkKeyEncoding, discover
from zarrfs.formats.v3 import metadata_from_json
from zarrfs.grid import Box
from zarrfs.store import Store
from zarrfs.tree import CHUNK, Ref, Tree
from zarrfs.views.array_dir import Layout

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)

VENV_BIN = Path(sys.executable).parent
SHAPE = (16, 16)
VALUES = np.arange(256, dtype="<i4").reshape(SHAPE) * 3 + 1


def array_doc(shape: tuple[int, ...] = SHAPE, chunks: tuple[int, ...] = (8, 8),
              encoding: tuple[str, str] = ("default", "/")) -> dict[str, Any]:
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": encoding[0], "configuration": {"separator": encoding[1]}},
        "fill_value": 0,
        "attributes": {},
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                   {"name": "zstd", "configuration": {"level": 1}}],
    }


def create_array(path: Path) -> None:
    """A 16x16 int32 array in 8x8 chunks holding VALUES."""
    array = array_metadata.create_array(Store(LocalFileSystem(), str(path)), metadata_from_json(array_doc()))
    try:
        array.write(Box((0, 0), SHAPE), VALUES)
        array.flush()
    finally:
        array.close()


def read_array(path: Path) -> np.ndarray:
    array = array_metadata.open_array(Store(LocalFileSystem(), str(path), read_only=True))
    try:
        return array.read(Box((0, 0), SHAPE))
    finally:
        array.close()


def pwrite(path: str | Path, data: bytes, offset: int, *, fsync: bool = True) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        assert os.pwrite(fd, data, offset) == len(data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def errno_of(action: Callable[[], object]) -> int:
    """The errno an action fails with, 0 when it succeeds."""
    try:
        action()
    except OSError as e:
        return e.errno or -1
    return 0


# -- (a) names: the views layer ---------------------------------------------------------------


class Namespace:
    """The names of a mounted array's tree (zarrfs.tree over a store holding only its
    metadata): lookups and listings never read a chunk."""

    def __init__(self, encoding: tuple[str, str], geometry: Any) -> None:
        shape, chunks = geometry
        self.encoding = ChunkKeyEncoding(*encoding)
        self.grid = tuple(-(-s // c) for s, c in zip(shape, chunks, strict=True))
        doc = array_doc(shape, chunks, encoding)
        store = Store.open(f"memory://security/{encoding[0]}{encoding[1]}{len(shape)}")
        store.put("zarr.json", json.dumps(doc).encode())
        root = discover(store.get, "")
        assert root is not None
        self.tree = Tree(store, root, Shared(1 << 20, 1), Layout())

    def lookup(self, directory: Ref, name: str) -> Ref | None:
        return self.tree.lookup(directory, name)

    def listdir(self, directory: Ref) -> list[tuple[str, Ref]]:
        found = []
        for name in self.tree.names(directory):
            node = self.tree.lookup(directory, name)
            assert node is not None, name
            found.append((name, node))
        return found

    def chunk_index(self, node: Ref) -> tuple[int, ...] | None:
        directory = self.tree.open_array(node.path).directory
        assert directory is not None
        resolved = directory.names.resolve(node.parts)
        return resolved[1] if resolved is not None and node.role == CHUNK else None


ENCODINGS = [("default", "/"), ("default", "."), ("v2", "."), ("v2", "/")]
GEOMETRIES = [((25, 7), (10, 4)), ((25,), (10,)), ((5, 6, 4), (2, 3, 4))]
NAMESPACE_PARAMS = [(e, g) for e in ENCODINGS for g in GEOMETRIES]


def namespace_id(param: Any) -> str:
    (name, separator), (shape, _) = param
    return f"{name}{separator}-rank{len(shape)}"


@functools.cache
def make_namespace(encoding: tuple[str, str], geometry: Any) -> Namespace:
    return Namespace(encoding, geometry)


def directories(namespace: Namespace) -> list[Ref]:
    """Every directory of the tree, found by listing (the grids here are small)."""
    found: list[Ref] = [namespace.tree.root]
    position = 0
    while position < len(found):
        for _, child in namespace.listdir(found[position]):
            if child.is_dir:
                found.append(child)
        position += 1
    return found


def listed(namespace: Namespace, directory: Ref) -> dict[str, Ref]:
    return dict(namespace.listdir(directory))


# Names no encoding ever uses: they must resolve to nothing in any directory.
BAD_NAMES = [
    "", ".", "..", "...", "\x00", "0\x00", "c\x00", "\x00/0", "c/\x00", "/", "//", "/0", "0/",
    "c/0", "c/0/0", "/c/0/0", "/etc/passwd", "../zarr.json", "..\\zarr.json", "c/../../x",
    "c/0/..", "a" * 10_000, "-1", "-0", "+1", " 1", "1 ",
    "1\n", "01", "00", "0x1", "1e3", "1_0", "01.0", "c.01.0", "c..0", "c.0.", ".c.0.0", "c.-1.0",
    "\u0661", "\u0660", "\uff11", "\u200b0", "0\u200b", "\ufffd", "C", "c0", "zarr.json/x",
    str(2**64), "18446744073709551616", "9" * 300, "c." + "9" * 300 + ".0",
]
# Digits str.isdigit accepts but int() refuses, and digit strings longer than int() takes
# (4300 digits): zarrfs.views._is_index and ChunkKeyEncoding.parse call int() on them.
INT_BREAKERS = ["\u00b2", "\u2460", "1\u00b9", "9" * 5000, "0" * 10_000]


@pytest.mark.parametrize("param", NAMESPACE_PARAMS, ids=namespace_id)
def test_bad_names_resolve_to_nothing(param: Any) -> None:
    namespace = make_namespace(*param)
    dirs = directories(namespace)
    assert len(dirs) >= 2
    resolved = [(d, name[:20]) for d in dirs for name in BAD_NAMES
                if namespace.lookup(d, name) is not None]
    assert not resolved


def test_names_that_break_int_resolve_to_nothing() -> None:
    broken = []
    for param in NAMESPACE_PARAMS:
        namespace = make_namespace(*param)
        for directory in directories(namespace):
            for name in INT_BREAKERS:
                for prefix in ("", "c.", "c.0.", "0."):
                    try:
                        node = namespace.lookup(directory, prefix + name)
                    except ValueError:
                        broken.append(f"{namespace_id(param)}: {(prefix + name)[:12]!r} raises")
                    else:
                        assert node is None
    assert not broken, "\n".join(sorted(set(broken)))


NAME_PIECES = st.sampled_from(
    [*"0123456789c./\\-+ _xe\x00", "\u0661", "\uff11", "\u200b", "..", "\ufffd", "zarr.json"])


@pytest.mark.parametrize("param", NAMESPACE_PARAMS, ids=namespace_id)
@settings(max_examples=150, deadline=None)
@given(pieces=st.lists(NAME_PIECES, max_size=10))
def test_only_listed_names_resolve(param: Any, pieces: list[str]) -> None:
    """A name resolves only when it is exactly one that the directory lists."""
    namespace = make_namespace(*param)
    name = "".join(pieces)
    for directory in directories(namespace):
        node = namespace.lookup(directory, name)
        if node is not None:
            assert listed(namespace, directory).get(name) == node, (directory, name)


@pytest.mark.parametrize("param", NAMESPACE_PARAMS, ids=namespace_id)
def test_every_resolvable_chunk_maps_to_a_key_inside_the_array(param: Any) -> None:
    """What the store is asked for: well-formed keys of in-grid chunks, nothing else."""
    namespace = make_namespace(*param)
    encoding = namespace.encoding
    grid = namespace.grid
    number = r"(0|[1-9][0-9]*)"
    sep = re.escape(encoding.separator)
    head = "c" + sep if encoding.name == "default" else ""
    pattern = re.compile(head + sep.join([number] * len(grid)))
    chunks = []
    for directory in directories(namespace):
        for name, node in namespace.listdir(directory):
            assert namespace.lookup(directory, name) == node  # listed names resolve
            index = namespace.chunk_index(node)
            if index is not None:
                chunks.append(index)
    assert sorted(chunks) == sorted(np.ndindex(*grid))
    store = Store(LocalFileSystem(), "/srv/array")
    for index in chunks:
        key = encoding.key(index)
        assert pattern.fullmatch(key), key
        assert encoding.parse(key, len(grid)) == index
        assert os.path.normpath(store.path(key)).startswith("/srv/array/")


# -- (a) names: through a mount over a recording store ---------------------------------------

FAULTY_COMMAND = (sys.executable, "-m", "tests.helpers.faulty_fs", "zarrfs.cli")


def recording_rules(root: Path) -> list[dict[str, Any]]:
    """Rules that fail nothing inside the array (a zero-second "hang" just counts the call)
    and refuse, and count, anything else."""
    inside = glob.escape(str(root))
    return [
        {"name": "dotdot", "pattern": "*..*", "exception": "PermissionError", "errno": "EACCES"},
        {"name": "inside", "pattern": inside + "/*", "action": "hang", "seconds": 0},
        {"name": "root", "pattern": inside, "action": "hang", "seconds": 0},
        {"name": "outside", "pattern": "*", "exception": "PermissionError", "errno": "EACCES"},
    ]


def tree(path: Path) -> dict[str, tuple[int, int, int]]:
    """Every file and directory under `path`: (mode, size, mtime_ns)."""
    found = {}
    for directory, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(directory, name)
            info = os.lstat(full)
            found[os.path.relpath(full, path)] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return found


ENOENT, ENOTDIR, ENAMETOOLONG = errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG
MOUNT_NAMES: list[tuple[str | bytes, int | tuple[int, ...]]] = [
    ("chunks/c/-1", ENOENT), ("chunks/c/00", ENOENT), ("chunks/c/+0", ENOENT),
    ("chunks/c/ 0", ENOENT), ("chunks/c/0 ", ENOENT), ("chunks/c/0x0", ENOENT),
    ("chunks/c/\u0660", ENOENT), ("chunks/c/\uff11", ENOENT), ("chunks/c/2", ENOENT),
    ("chunks/c/0/2", ENOENT), ("chunks/c/0/" + "9" * 255, ENOENT),
    ("chunks/c/1" + "0" * 254, ENOENT), ("chunks/c/...", ENOENT), ("chunks/c.0.0", ENOENT),
    ("chunks/c\\0\\0", ENOENT), ("chunks/zarr.json", ENOENT), ("chunks/data", ENOENT),
    ("chunks/.zarrfs-tmp-1-0-0", ENOENT), ("chunks/c/0/0\n", ENOENT), ("chunks/C", ENOENT),
    ("chunks/c/0/00", ENOENT), ("chunks/c/0/1e0", ENOENT), ("chunks/c/0/\u200b0", ENOENT),
    ("chunks//etc/passwd", ENOENT), ("chunks/x/../c/0/0", ENOENT), ("zarr.jsonx", ENOENT),
    ("Data", ENOENT), (b"chunks/c/\xff", ENOENT), (b"chunks/c/0/\xc0\xb0", ENOENT),
    ("chunks/c/0/0/0", ENOTDIR), ("chunks/c/0/0/", ENOTDIR), ("zarr.json/x", ENOTDIR),
    ("data/..", ENOTDIR), ("data/.", ENOTDIR),
    # Long names: FUSE passes names of up to 1024 bytes, the kernel refuses longer ones; past
    # NAME_MAX (255) the mount answers ENAMETOOLONG itself, as a local filesystem (issue 72).
    ("chunks/c/" + "9" * 256, ENAMETOOLONG), ("chunks/c/" + "9" * 1024, ENAMETOOLONG),
    ("chunks/c/" + "9" * 4000, ENAMETOOLONG),
    ("chunks/" + "a" * 10_000, ENAMETOOLONG),
]


def test_names_through_a_mount_never_reach_outside_the_array(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    root = store_dir / "array"
    create_array(root)
    (store_dir / "secret.txt").write_text("outside the array\n")
    (store_dir / "array-sibling").mkdir()
    (store_dir / "array-sibling" / "zarr.json").write_text("{}")
    (tmp_path / "x").write_text("next to the mountpoint\n")
    before = tree(store_dir)
    config, counters = tmp_path / "faults.json", tmp_path / "counters.json"
    write_config(str(config), recording_rules(root), target_protocol="file",
                 target_options={"auto_mkdir": True}, counters_file=str(counters))
    env = child_env(**{CONFIG_ENV: str(config)})
    mountpoint = tmp_path / "mnt"
    problems = []
    with mounted(f"faulty://{root}", mountpoint, command=FAULTY_COMMAND, env=env) as mount:
        mp = str(mountpoint)
        assert np.array_equal(np.frombuffer(mount.data.read_bytes(), "<i4").reshape(SHAPE),
                              VALUES)
        for rel, expected in MOUNT_NAMES:
            path = os.fsencode(mp) + b"/" + (rel if isinstance(rel, bytes) else rel.encode())
            got = errno_of(lambda path=path: os.stat(path))  # type: ignore[misc]
            if got not in (expected if isinstance(expected, tuple) else (expected,)):
                problems.append(f"stat {rel[:40]!r}: {errno.errorcode.get(got, got)}, "
                                f"expected {expected}")

        # ".." and extra slashes are the kernel's path walk; they never reach the daemon.
        assert os.path.samefile(f"{mp}/..", tmp_path)
        assert os.path.samefile(f"{mp}/chunks/../../x", tmp_path / "x")
        assert os.path.samefile(f"{mp}/chunks/c/0/../..", f"{mp}/chunks")
        assert os.path.samefile(f"{mp}/chunks/c//0", f"{mp}/chunks/c/0")
        assert os.path.samefile(f"{mp}//chunks///c/0/1", f"{mp}/chunks/c/0/1")
        assert os.path.isdir(f"{mp}/chunks/c/0/")

        # Nothing can create, remove or rename a name.
        mutations: dict[str, Callable[[], object]] = {
            "create": lambda: os.close(os.open(f"{mp}/chunks/c/0/2", os.O_CREAT | os.O_WRONLY)),
            "create at the root": lambda: os.close(
                os.open(f"{mp}/evil", os.O_CREAT | os.O_WRONLY | os.O_EXCL)),
            "mkdir": lambda: os.mkdir(f"{mp}/chunks/c/9"),
            "mknod": lambda: os.mknod(f"{mp}/fifo", stat.S_IFIFO | 0o600),
            "symlink": lambda: os.symlink("/etc/passwd", f"{mp}/chunks/c/0/link"),
            "link": lambda: os.link(f"{mp}/data", f"{mp}/chunks/c/0/2"),
            "rename": lambda: os.rename(f"{mp}/data", f"{mp}/chunks/c/0/2"),
            "unlink": lambda: os.unlink(f"{mp}/chunks/c/0/0"),
            "rmdir": lambda: os.rmdir(f"{mp}/chunks/c/1"),
            # (data itself can be truncated: that resizes the array, see test_resize.py)
            "truncate a chunk file": lambda: os.truncate(f"{mp}/chunks/c/0/0", 0),
            "truncate zarr.json": lambda: os.truncate(f"{mp}/zarr.json", 0),
            "setxattr": lambda: os.setxattr(f"{mp}/data", "user.key", b"../../x"),
        }
        for what, action in mutations.items():
            got = errno_of(action)
            if got != errno.EPERM:
                problems.append(f"{what}: {errno.errorcode.get(got, got)}, expected EPERM")

        # Writes through the files reach their own chunks only.
        pwrite(mount.chunk("c/1/1"), np.full(64, -7, "<i4").tobytes(), 0)
        pwrite(mount.data, np.full(16, -9, "<i4").tobytes(), 0)
        log = mount.log()
    assert not problems, "\n".join(problems)
    assert "internal error" not in log and "Traceback" not in log, log

    expected = VALUES.copy()
    expected[8:, 8:] = -7
    expected[0, :] = -9
    assert np.array_equal(read_array(root), expected)
    faults = read_counters(str(counters))["faults"]
    calls = read_counters(str(counters))["calls"]
    assert faults.get("inside", 0) > 0, faults
    assert faults.get("outside", 0) == 0 and faults.get("dotdot", 0) == 0, faults
    assert sum(faults.values()) == sum(calls.values()), (faults, calls)  # every call classified
    # Outside the array nothing changed; inside, only chunk keys and zarr.json exist.
    after = tree(store_dir)
    outside = {k: v for k, v in after.items() if not k.startswith("array/") and k != "array"}
    assert outside == {k: v for k, v in before.items()
                       if not k.startswith("array/") and k != "array"}
    assert (store_dir / "secret.txt").read_text() == "outside the array\n"
    files = {os.path.relpath(k, "array") for k, (mode, _, _) in after.items()
             if k.startswith("array/") and stat.S_ISREG(mode)}
    assert files == {"zarr.json", "c/0/0", "c/0/1", "c/1/0", "c/1/1"}


def test_digit_like_names_through_a_mount_are_not_found(tmp_path: Path) -> None:
    root = tmp_path / "array"
    create_array(root)
    with mounted(root, tmp_path / "mnt") as mount:
        got = {name: errno_of(lambda name=name: os.stat(mount.chunk(name)))  # type: ignore[misc]
               for name in ("c/\u00b2", "c/0/\u2460")}
        log = mount.log()
    assert got == {"c/\u00b2": errno.ENOENT, "c/0/\u2460": errno.ENOENT}, (got, log)


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


# -- (d) credentials ----------------------------------------------------------------------------

ACCESS_KEY = "AKIAZARRFSDONOTLEAK7"
SECRET_KEY = "zarrfsSecretDoNotLeak0123456789abcdefABCD"
SESSION_TOKEN = "zarrfsSessionTokenDoNotLeak9876543210"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
               "AWS_SESSION_TOKEN": SESSION_TOKEN}


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{stderr}"
    return lines[0]


def test_credentials_as_mount_options_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    done = subprocess.run([ZARRFS, "mount", "s3://bucket/array", str(mountpoint), "-o",
                           f"endpoint_url=http://127.0.0.1:9,secret={SECRET_KEY}"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert "secret" in line and "environment" in line and SECRET_KEY not in line, line
    assert not is_mounted(mountpoint)
    for name in ("key", "token", "password", "aws_access_key_id", "aws_secret_access_key",
                 "aws_session_token"):
        assert zarrfs_main(["mount", "s3://bucket/array", str(mountpoint), "-o",
                            f"ro,{name}={SECRET_KEY}"]) == 1
        line = one_line(capsys.readouterr().err)
        assert name in line and "environment" in line and SECRET_KEY not in line, line
    assert not is_mounted(mountpoint)


def write_s3_array(server: S3Server) -> None:
    zarr = pytest.importorskip("zarr")
    array = zarr.create_array(
        store=f"s3://{server.bucket}/array", shape=SHAPE, chunks=(8, 8), dtype="<i4",
        fill_value=0, storage_options={"endpoint_url": server.endpoint_url,
                                       "key": "testing", "secret": "testing"})
    array[...] = VALUES


@contextlib.contextmanager
def s3_mount(server: S3Server, tmp_path: Path, log: Path) -> Iterator[Any]:
    pytest.importorskip("s3fs")
    write_s3_array(server)
    options = [f"endpoint_url={server.endpoint_url}", "debug", f"log={log}"]
    with mounted(f"s3://{server.bucket}/array", tmp_path / "mnt", options,
                 env=CREDENTIALS) as mount:
        assert mount.data.read_bytes() == VALUES.tobytes()
        pwrite(mount.chunk("c/1/1"), np.zeros(64, "<i4").tobytes(), 0)  # a signed PUT too
        yield mount


def test_environment_credentials_stay_out_of_argv_and_mount_table(
    s3_server: S3Server, tmp_path: Path
) -> None:
    log = tmp_path / "daemon.log"
    with s3_mount(s3_server, tmp_path, log) as mount:
        with open(f"/proc/{mount.process.pid}/cmdline", "rb") as f:
            places = {"argv": f.read().decode(errors="replace")}
        for table in ("/proc/mounts", "/proc/self/mountinfo"):
            places[table] = Path(table).read_text()
        assert f"s3://{s3_server.bucket}/array" in places["/proc/mounts"]
        with open(f"/proc/{mount.process.pid}/environ", "rb") as f:
            assert SECRET_KEY.encode() in f.read()  # it was there to be leaked
    places["daemon log"] = log.read_text(errors="replace")
    places["daemon stderr"] = mount.log()
    assert "mounted" in places["daemon log"]
    leaks = [f"{what} holds {name}" for what, text in places.items()
             for name, value in CREDENTIALS.items()
             if value in text and not (what == "daemon log" and name != "AWS_SECRET_ACCESS_KEY")]
    assert not leaks  # (the access key and token in the debug log: the test below)


def test_debug_log_holds_no_access_key_or_session_token(
    s3_server: S3Server, tmp_path: Path
) -> None:
    log = tmp_path / "daemon.log"
    with s3_mount(s3_server, tmp_path, log):
        pass
    text = log.read_text(errors="replace")
    assert "DEBUG" in text
    assert ACCESS_KEY not in text and SESSION_TOKEN not in text


@contextlib.contextmanager
def http_server(directory: Path) -> Iterator[int]:
    """A plain HTTP server for `directory` on 127.0.0.1 (it ignores the URL's user:password)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    with answering(functools.partial(Quiet, directory=str(directory))) as port:
        yield port


PASSWORD = "UrlPasswordDoNotLeak42"


@pytest.mark.parametrize("debug", [
    False,
    True,
], ids=["info", "debug"])
def test_a_password_in_the_url_stays_out_of_the_mount_table_and_log(
    tmp_path: Path, debug: bool
) -> None:
    pytest.importorskip("aiohttp")
    create_array(tmp_path / "array")
    log = tmp_path / "daemon.log"
    options = ["ro", f"log={log}", *(["debug"] if debug else [])]
    with http_server(tmp_path) as port:
        source = f"http://alice:{PASSWORD}@127.0.0.1:{port}/array"
        with mounted(source, tmp_path / "mnt", options) as mount:
            assert mount.data.read_bytes() == VALUES.tobytes()
            table = Path("/proc/mounts").read_text()
            assert f"http://127.0.0.1:{port}/array" in table
            assert PASSWORD not in table
    text = log.read_text(errors="replace")
    assert "mounted" in text
    assert PASSWORD not in text
