"""Security of names: no name a user can pass reaches a store key outside the array.

The views layer resolves only the canonical names of its nodes, and through a real mount (over
a recording `faulty://` store) every store call stays inside the array directory.
"""

from __future__ import annotations

import errno
import functools
import glob
import json
import os
import re
import shutil
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fsspec.implementations.local import LocalFileSystem
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.faulty_fs import CONFIG_ENV, child_env, read_counters, write_config
from tests.helpers.mounting import mounted
from tests.helpers.security_arrays import SHAPE, VALUES, array_doc, create_array, errno_of, pwrite, read_array
from zarrfs.array import Shared
from zarrfs.formats import ChunkKeyEncoding, discover
from zarrfs.store import Store
from zarrfs.tree import CHUNK, Ref, Tree
from zarrfs.views.array_dir import ViewSettings

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)


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
        self.tree = Tree(store, root, Shared(1 << 20, 1), ViewSettings())

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
            # (data itself can be truncated: that resizes the array, see test_resize_shrink.py)
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
