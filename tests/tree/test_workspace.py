"""The mount as a workspace (local stores): attributes edited with setfattr, groups made with
mkdir and removed with rmdir, arrays and groups deleted with `rm -r` and moved with `mv`, the
consolidated metadata of the groups above kept in step, and the refusals (EROFS, EINVAL,
EPERM, ENOTEMPTY). zarr-python (opening through consolidated metadata, which it trusts) and
TensorStore read the store as the oracles of what landed.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorstore as ts
import zarr

from tests.helpers.mounting import MountFactory

VALUES = np.arange(60, dtype="<i2").reshape(10, 6)


def _hierarchy(path: Path, zarr_format: int = 3, *, consolidated: bool = True) -> None:
    """A group holding a plain array `a`, and a group `s` holding a sharded (v2: plain) `b`."""
    group = zarr.open_group(path, mode="w", zarr_format=zarr_format)  # type: ignore[arg-type]
    group.create_array("a", shape=VALUES.shape, dtype="<i2", chunks=(4, 3))[...] = VALUES
    sub = group.create_group("s")
    shards = (8,) if zarr_format == 3 else None
    sub.create_array("b", shape=(16,), dtype="<f4", chunks=(4,), shards=shards)[...] = np.arange(16)
    if consolidated:
        zarr.consolidate_metadata(path)


def _opened(path: Path) -> zarr.Group:
    return zarr.open_consolidated(path, mode="r")  # what the consolidated metadata says


def _array(group: zarr.Group, path: str) -> zarr.Array[Any]:
    found = group[path]
    assert isinstance(found, zarr.Array)
    return found


def _members(group: zarr.Group) -> set[str]:
    return {name for name, _ in group.members(max_depth=None)}


def _fails(code: int, action: Callable[[], Any]) -> None:
    with pytest.raises(OSError) as caught:
        action()
    assert caught.value.errno == code, caught.value


def _keys(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


# -- attributes ----------------------------------------------------------------------------


@pytest.mark.fast
@pytest.mark.parametrize("zarr_format", [3, 2])
def test_setfattr_replaces_attributes_of_arrays_and_groups(
        tmp_path: Path, mount_array: MountFactory, zarr_format: int) -> None:
    store = tmp_path / "g.zarr"
    _hierarchy(store, zarr_format)
    zarr.open_array(store / "a", mode="r+").attrs["old"] = "replaced"
    name = "zarr.json" if zarr_format == 3 else ".zarray"
    before = json.loads((store / "a" / name).read_text())
    mount = mount_array(store, ["rw"])

    os.setxattr(mount.path / "a", "user.zarr.attributes", b'{"units": "K", "scale": [1, 2]}')
    os.setxattr(mount.path / "s", "user.zarr.attributes", b'{"title": "sub"}')
    os.setxattr(mount.path, "user.zarr.attributes", b'{"root": true}')

    new = {"units": "K", "scale": [1, 2]}
    assert json.loads(os.getxattr(mount.path / "a", "user.zarr.attributes")) == new
    assert json.loads(os.getxattr(mount.path, "user.zarr.attributes")) == {"root": True}
    group = _opened(store)
    assert dict(group["a"].attrs) == {"units": "K", "scale": [1, 2]}
    assert dict(group["s"].attrs) == {"title": "sub"}
    assert dict(group.attrs) == {"root": True}
    assert dict(zarr.open_group(store, mode="r", use_consolidated=False)["a"].attrs) == new
    # Every other field as it was, in the layout zarr-python writes.
    stored = (store / "a" / name).read_text()
    after = json.loads(stored)
    if zarr_format == 3:
        assert after == {**before, "attributes": {"units": "K", "scale": [1, 2]}}
        assert stored == json.dumps(after, indent=2)
    else:
        assert after == before
        assert json.loads((store / "a" / ".zattrs").read_text()) == {"units": "K", "scale": [1, 2]}
    # The array still reads, and the metadata file shown has the new size.
    assert np.array_equal(np.fromfile(mount.path / "a" / "data", "<i2").reshape(10, 6), VALUES)
    shown = "zarr.json" if zarr_format == 3 else ".zattrs"
    assert (mount.path / "a" / shown).read_bytes() == (store / "a" / shown).read_bytes()
    driver = "zarr3" if zarr_format == 3 else "zarr"
    opened = ts.open({"driver": driver, "kvstore": {"driver": "file", "path": str(store / "a")}}).result()
    assert np.array_equal(opened.read().result(), VALUES)
    if zarr_format == 3:
        raw = ts.KvStore.open({"driver": "file", "path": str(store / "a") + "/"}).result().read("zarr.json")
        assert json.loads(raw.result().value)["attributes"] == {"units": "K", "scale": [1, 2]}


def test_attributes_survive_a_resize(tmp_path: Path, mount_array: MountFactory) -> None:
    store = tmp_path / "g.zarr"
    _hierarchy(store)
    mount = mount_array(store, ["rw"])
    data = mount.path / "a" / "data"
    data.read_bytes()  # (opens the array before its attributes change)
    os.setxattr(mount.path / "a", "user.zarr.attributes", b'{"kept": 1}')
    os.truncate(data, 5 * 6 * 2)
    array = _array(_opened(store), "a")
    assert array.shape == (5, 6)
    assert dict(array.attrs) == {"kept": 1}


def test_bad_attributes_are_einval_and_change_nothing(tmp_path: Path, mount_array: MountFactory) -> None:
    store = tmp_path / "g.zarr"
    _hierarchy(store)
    before = _keys(store), (store / "zarr.json").read_bytes()
    mount = mount_array(store, ["rw"])
    for bad in (b"[1, 2]", b"not json", b'"text"', b"\xff"):
        _fails(errno.EINVAL, functools.partial(os.setxattr, mount.path / "a", "user.zarr.attributes", bad))
    _fails(errno.EPERM, lambda: os.setxattr(mount.path / "a", "user.zarr.shape", b"1,2"))
    _fails(errno.EPERM, lambda: os.setxattr(mount.path / "a" / "zarr.json", "user.zarr.attributes", b"{}"))
    assert (_keys(store), (store / "zarr.json").read_bytes()) == before


# -- groups ------------------------------------------------------------------------------


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_mkdir_makes_a_group_rmdir_removes_an_empty_one(
        tmp_path: Path, mount_array: MountFactory, zarr_format: int) -> None:
    store = tmp_path / "g.zarr"
    _hierarchy(store, zarr_format)
    mount = mount_array(store, ["rw"])
    (mount.path / "new").mkdir()
    (mount.path / "s" / "deeper").mkdir()
    metadata = "zarr.json" if zarr_format == 3 else ".zgroup"
    assert sorted(os.listdir(mount.path / "new")) == sorted([metadata, "data.nc", "data.h5"])
    group = _opened(store)
    assert isinstance(group["new"], zarr.Group) and isinstance(group["s/deeper"], zarr.Group)
    assert group["new"].metadata.zarr_format == zarr_format
    assert {"new", "s/deeper"} <= _members(zarr.open_group(store, mode="r", use_consolidated=False))

    _fails(errno.ENOTEMPTY, lambda: (mount.path / "s").rmdir())
    (mount.path / "new").rmdir()
    (mount.path / "s" / "deeper").rmdir()
    assert not (store / "new").exists() and not (store / "s" / "deeper").exists()
    assert _members(_opened(store)) == {"a", "s", "s/b"}
    assert sorted(os.listdir(mount.path)) == sorted(["a", "data.nc", "data.h5", "s", *_metadata(store)])


def _metadata(store: Path) -> list[str]:
    return [p.name for p in store.iterdir() if p.is_file()]


def test_names_the_formats_use_are_einval(tmp_path: Path, mount_array: MountFactory) -> None:
    store = tmp_path / "g.zarr"
    _hierarchy(store)
    before = _keys(store)
    mount = mount_array(store, ["rw"])
    for name in ("c", "chunks", "data", ".zarray", ".zgroup", ".zattrs", ".zmetadata", "__x"):
        _fails(errno.EINVAL, (mount.path / "s" / name).mkdir)
    _fails(errno.EEXIST, lambda: (mount.path / "zarr.json").mkdir())  # (the kernel sees the file)
    _fails(errno.EEXIST, lambda: (mount.path / "a").mkdir())
    _fails(errno.EPERM, lambda: (mount.path / "a" / "x").mkdir())  # not inside an array
    assert _keys(store) == before


# -- deleting and moving ------------------------------------------------------------------


@pytest.mark.fast
def test_rm_r_deletes_plain_and_sharded_arrays_and_group_trees(
        tmp_path: Path, mount_array: MountFactory) -> None:
    store = tmp_path / "g.zarr"
    _hierarchy(store)
    mount = mount_array(store, ["rw"])
    subprocess.run(["rm", "-r", str(mount.path / "a")], check=True)
    assert not any(k.startswith("a/") for k in _keys(store))
    assert _members(_opened(store)) == {"s", "s/b"}
    assert not (mount.path / "a").exists()

    subprocess.run(["rm", "-r", str(mount.path / "s" / "b")], check=True)  # sharded
    assert _keys(store) == ["s/zarr.json", "zarr.json"]
    (mount.path / "s" / "t").mkdir()
    subprocess.run(["rm", "-rf", str(mount.path / "s")], check=True)  # a tree
    assert _keys(store) == ["zarr.json"]
    assert _members(_opened(store)) == set()
    assert sorted(os.listdir(mount.path)) == ["data.h5", "data.nc", "zarr.json"]


def test_single_files_cannot_be_deleted(tmp_path: Path, mount_array: MountFactory) -> None:
    store = tmp_path / "g.zarr"
    _hierarchy(store)
    before = _keys(store)
    mount = mount_array(store, ["rw"])
    for path in ("a/data", "a/zarr.json", "a/chunks/c/0/0", "zarr.json"):
        _fails(errno.EPERM, (mount.path / path).unlink)
    _fails(errno.ENOTEMPTY, lambda: (mount.path / "a").rmdir())  # an array: only `rm -r`
    _fails(errno.EPERM, lambda: (mount.path / "a" / "chunks").rmdir())
    _fails(errno.EPERM, lambda: os.rename(mount.path / "a" / "data", mount.path / "a" / "other"))
    assert _keys(store) == before
    assert np.array_equal(np.fromfile(mount.path / "a" / "data", "<i2").reshape(10, 6), VALUES)


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_mv_moves_arrays_and_groups(tmp_path: Path, mount_array: MountFactory, zarr_format: int) -> None:
    store = tmp_path / "g.zarr"
    _hierarchy(store, zarr_format)
    mount = mount_array(store, ["rw"])
    (mount.path / "a" / "data").read_bytes()  # (opened: moved with its cache)
    os.rename(mount.path / "a", mount.path / "s" / "moved")
    os.rename(mount.path / "s", mount.path / "t")
    group = _opened(store)
    assert _members(group) == {"t", "t/b", "t/moved"}
    assert np.array_equal(_array(group, "t/moved")[...], VALUES)
    assert np.array_equal(_array(group, "t/b")[...], np.arange(16))
    assert np.array_equal(np.fromfile(mount.path / "t" / "moved" / "data", "<i2").reshape(10, 6), VALUES)
    assert not (mount.path / "a").exists() and not (mount.path / "s").exists()
    _fails(errno.EINVAL, lambda: os.rename(mount.path / "t", mount.path / "t" / "x"))
    _fails(errno.EINVAL, lambda: os.rename(mount.path / "t", mount.path / "c"))


# -- consistency and read-only mounts --------------------------------------------------------


def test_two_mounts_adding_to_one_group_keep_both(tmp_path: Path, mount_array: MountFactory) -> None:
    store = tmp_path / "g.zarr"
    _hierarchy(store)
    first, second = mount_array(store, ["rw"]), mount_array(store, ["rw"])
    for index in range(5):
        (first.path / f"one{index}").mkdir()
        (second.path / f"two{index}").mkdir()
    names = {f"one{i}" for i in range(5)} | {f"two{i}" for i in range(5)}
    assert names <= _members(_opened(store))


def test_a_read_only_mount_refuses_every_change(tmp_path: Path, mount_array: MountFactory) -> None:
    store = tmp_path / "g.zarr"
    _hierarchy(store)
    before = _keys(store)
    mount = mount_array(store, ["ro"])
    _fails(errno.EROFS, lambda: os.setxattr(mount.path / "a", "user.zarr.attributes", b"{}"))
    _fails(errno.EROFS, lambda: (mount.path / "new").mkdir())
    _fails(errno.EROFS, lambda: (mount.path / "a" / "data").unlink())
    _fails(errno.EROFS, lambda: (mount.path / "s").rmdir())
    _fails(errno.EROFS, lambda: os.rename(mount.path / "a", mount.path / "b"))
    assert subprocess.run(["rm", "-rf", str(mount.path / "a")], capture_output=True).returncode != 0
    assert _keys(store) == before
