"""A local store's symbolic links stay inside it: a chunk linked to a root-only file outside
the store is refused (EIO for every reader, one log line naming the key, the target and
`references_allow`), read once `-o references_allow=` names where it leads; links inside the
store read as zarr-python reads them; a group directory linked outside is neither listed nor
entered. Root serves the mount (`ro,allow_other`) and `nobody` reads it."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import Mount, mounted
from tests.helpers.trust_helpers import public, raw_array, read_as, secret_file
from tests.helpers.zip_fixtures import values, zipstore_array

__all__ = ["public"]  # (the fixture, used by name)

VALUES = np.arange(1, 13, dtype="u1")  # three chunks of four
SECRET = b"\xde\xad\xbe\xef"


def leaking_store(public: Path) -> tuple[Path, Path]:
    """An array whose chunk `c/1` links to a root-only file outside the store."""
    store = public / "a.zarr"
    raw_array(store, VALUES, 4)
    secret = secret_file(public / "private", SECRET)
    (store / "c" / "1").unlink()
    (store / "c" / "1").symlink_to(secret)
    return store, secret


def assert_refused_and_logged(mount: Mount, key: str, target: Path) -> None:
    assert read_as(mount.data) == errno.EIO  # nobody, through allow_other
    assert read_as(mount.data, None) == errno.EIO  # root, through the mount
    assert read_as(mount.data, None) == errno.EIO
    lines = [line for line in mount.log().splitlines()
             if repr(key) in line and str(target) in line and "references_allow" in line]
    assert lines, mount.log()


@pytest.mark.fast
def test_a_chunk_linked_outside_is_refused_to_every_reader(public: Path) -> None:
    store, secret = leaking_store(public)
    assert read_as(secret) == errno.EACCES  # (nobody may not read it itself)
    with mounted(store, public / "mnt", ["ro", "allow_other"]) as mount:
        assert_refused_and_logged(mount, "c/1", secret)
        head = read_as(mount.chunk("c/0"))
        assert head == VALUES[:4].tobytes()  # the chunks inside still read
        assert zarr.open_array(str(store))[:4].tobytes() == VALUES[:4].tobytes()


def test_references_allow_names_where_links_may_lead(public: Path) -> None:
    store, secret = leaking_store(public)
    options = ["ro", "allow_other", f"references_allow={secret.parent}"]
    with mounted(store, public / "mnt", options) as mount:
        expected = VALUES.copy()
        expected[4:8] = np.frombuffer(SECRET, "u1")
        assert read_as(mount.data) == expected.tobytes()


def chunk_directory_linked_outside(public: Path) -> tuple[Path, Path]:
    """An array whose chunk directory `c` is a link to a private directory outside it: (the
    store, that directory)."""
    store = public / "a.zarr"
    raw_array(store, VALUES, 4)
    elsewhere = public / "private"
    elsewhere.mkdir(mode=0o700)
    (store / "c").rename(elsewhere / "c")
    (store / "c").symlink_to(elsewhere / "c")
    return store, elsewhere


def test_a_chunk_directory_linked_outside_is_refused(public: Path) -> None:
    """Not only the last component: a link on the way (`c` itself) is checked too."""
    store, elsewhere = chunk_directory_linked_outside(public)
    with mounted(store, public / "mnt", ["ro", "allow_other"]) as mount:
        assert_refused_and_logged(mount, "c/0", elsewhere / "c" / "0")


def linked_group(public: Path) -> Path:
    """A group holding an array `a`, links inside the store every way (an absolute and a
    relative link to a chunk, a linked chunk directory, a linked array), and a link `away`
    to a group outside the store."""
    root = public / "g.zarr"
    group = zarr.open_group(str(root), mode="w")
    for name in ("a", "b"):
        group.create_array(name, shape=(12,), chunks=(4,), dtype="u1", compressors=None)[...] = VALUES
    chunks = root / "a" / "c"
    (chunks / "1").unlink()
    (chunks / "1").symlink_to(chunks / "0")  # absolute, inside
    (chunks / "2").unlink()
    (chunks / "2").symlink_to("0")  # relative
    os.rename(root / "b" / "c", root / "b_chunks")
    (root / "b" / "c").symlink_to("../b_chunks")  # a chunk directory elsewhere in the store
    (root / "alias").symlink_to("a")  # an array linked under a second name
    outside = public / "private" / "other.zarr"
    outside.parent.mkdir(mode=0o700)
    other = zarr.open_group(str(outside), mode="w")
    other.create_array("hidden", shape=(4,), chunks=(4,), dtype="u1")[...] = 7
    (root / "away").symlink_to(outside)
    return root


def test_links_inside_the_store_read_as_zarr_python_reads_them(public: Path) -> None:
    root = linked_group(public)
    (root / "away").unlink()  # (zarr-python follows it: compared below, without it)
    oracle = zarr.open_group(str(root), mode="r")
    assert sorted(oracle.array_keys()) == ["a", "alias", "b"]
    with mounted(root, public / "mnt", ["ro", "allow_other"]) as mount:
        for name in ("a", "alias", "b"):
            assert read_as(mount.path / name / "data") == oracle[name][...].tobytes(), name


def test_a_group_linked_outside_is_neither_listed_nor_entered(public: Path) -> None:
    root = linked_group(public)
    with mounted(root, public / "mnt", ["ro", "allow_other"]) as mount:
        listed = sorted(os.listdir(mount.path))
        assert "away" not in listed and {"a", "alias", "b"} <= set(listed)
        assert read_as(mount.path / "away" / "hidden" / "data") in (errno.ENOENT, errno.EIO)
        assert read_as(mount.path / "a" / "data") == VALUES[[0, 1, 2, 3] * 3].tobytes()


def test_a_row_linked_outside_leaves_the_other_rows(public: Path) -> None:
    """A directory of chunks (a row of the grid) linked outside: its chunks are refused, the
    array's other chunks read, and its files still open (the check at open lists them all)."""
    store = public / "a.zarr"
    array = zarr.create_array(str(store), shape=(3, 4), chunks=(1, 4), dtype="u1", compressors=None)
    array[...] = VALUES.reshape(3, 4)
    elsewhere = public / "private"
    elsewhere.mkdir(mode=0o700)
    (store / "c" / "1").rename(elsewhere / "1")
    (store / "c" / "1").symlink_to(elsewhere / "1")
    with mounted(store, public / "mnt", ["ro", "allow_other"]) as mount:
        assert read_as(mount.chunk("c/0/0")) == VALUES[:4].tobytes()
        assert read_as(mount.chunk("c/2/0")) == VALUES[8:].tobytes()
        assert read_as(mount.chunk("c/1/0")) == errno.EIO
        assert read_as(mount.data) == errno.EIO
        assert read_as(mount.chunk("c/0/0")) == VALUES[:4].tobytes()


def test_a_zip_the_mount_names_through_a_link_is_the_one_it_serves(public: Path) -> None:
    """The archive a zip mount names is resolved once, when it mounts (as a directory store's
    root): a link to it serves the archive it leads to, read through its own directory."""
    (public / "archives").mkdir()
    archive = zipstore_array(public / "archives" / "a.zip")
    (public / "linked.zip").symlink_to(archive)
    with mounted(public / "linked.zip", public / "mnt", ["ro", "allow_other"]) as mount:
        assert read_as(mount.data) == values((100, 60), "int32").tobytes()


def test_nothing_is_written_through_a_link_leading_outside(public: Path) -> None:
    store, elsewhere = chunk_directory_linked_outside(public)
    before = {p.name: p.read_bytes() for p in (elsewhere / "c").iterdir()}
    with mounted(store, public / "mnt", ["rw", "allow_other"]) as mount:
        fd = os.open(mount.data, os.O_WRONLY)
        try:
            os.pwrite(fd, b"\xff" * 12, 0)
            try:
                os.fsync(fd)
                stored = None
            except OSError as e:
                stored = e.errno
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
        assert stored == errno.EIO
        assert {p.name: p.read_bytes() for p in (elsewhere / "c").iterdir()} == before
        assert sorted(os.listdir(elsewhere / "c")) == ["0", "1", "2"]  # (no temporary file there)
        # (the link replaced by a directory of the store's own: the unmount's write-back, which
        # retries a failing store for a minute, stores the chunks there; a retry may make the
        # directory first, once the link is gone)
        (store / "c").unlink()
        (store / "c").mkdir(exist_ok=True)
    assert {p.name: p.read_bytes() for p in (elsewhere / "c").iterdir()} == before
    assert zarr.open_array(str(store))[...].tobytes() == b"\xff" * 12
