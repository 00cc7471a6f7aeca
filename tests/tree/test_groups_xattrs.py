"""Extended attributes of groups and arrays on a real mount: what they list and hold, and a
set on a read-only mount gives EROFS."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.group_checks import nested, xattrs

# -- extended attributes ----------------------------------------------------------------------------

ARRAY_XATTRS = {"user.zarr.shape", "user.zarr.dtype", "user.zarr.chunks", "user.zarr.fill_value",
                "user.zarr.dimension_names", "user.zarr.attributes", "user.zarr.views"}


def test_extended_attributes(tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "tree.zarr"
    nested(store)
    mount = mount_array(store)
    img = mount.path / "a/b/img"
    for path in (img, img / "data"):
        attrs = xattrs(path)
        assert set(attrs) == ARRAY_XATTRS | {"user.zarr.inner_chunks"}
        assert attrs["user.zarr.shape"] == "40,60"
        assert attrs["user.zarr.dtype"] == "<u2"
        assert attrs["user.zarr.chunks"] == "20,30"
        assert attrs["user.zarr.inner_chunks"] == "10,10"
        assert json.loads(attrs["user.zarr.fill_value"]) == 7
        assert json.loads(attrs["user.zarr.dimension_names"]) == ["y", "x"]
        assert json.loads(attrs["user.zarr.attributes"]) == {"units": "counts"}
    vec = xattrs(mount.path / "a/vec")
    assert vec["user.zarr.dtype"] == "<i2"  # the flat view's byte order, not the stored >i2
    shape_chunks = (vec["user.zarr.shape"], vec["user.zarr.chunks"], vec["user.zarr.inner_chunks"])
    assert shape_chunks == ("50", "20", "5")
    assert json.loads(vec["user.zarr.fill_value"]) == -1
    top = xattrs(mount.path / "top")
    assert set(top) == ARRAY_XATTRS
    assert json.loads(top["user.zarr.dimension_names"]) is None
    assert json.loads(top["user.zarr.attributes"]) == {}
    assert xattrs(mount.path / "top/data") == top
    for group, attributes in (("", {"project": "zarrfs", "n": [1, 2]}), ("a", {"level": 1}),
                              ("a/b/c", {})):
        attrs = xattrs(mount.path / group)
        assert set(attrs) == {"user.zarr.attributes", "user.zarr.views"}
        assert json.loads(attrs["user.zarr.attributes"]) == attributes
        assert "data.h5" in json.loads(attrs["user.zarr.views"])
    with pytest.raises(OSError) as missing:
        os.getxattr(img, "user.zarr.nosuch")
    assert missing.value.errno == errno.ENODATA

    for path in (img, img / "data", mount.path / "a", mount.path):
        for name in ("user.zarr.shape", "user.mine"):
            with pytest.raises(OSError) as refused:
                os.setxattr(path, name, b"1")
            assert refused.value.errno == errno.EPERM, (path, name)
    assert xattrs(img)["user.zarr.shape"] == "40,60"

    if shutil.which("getfattr"):  # the attr package
        done = subprocess.run(["getfattr", "-d", "--absolute-names", str(img)],
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert 'user.zarr.shape="40,60"' in done.stdout.splitlines()
        assert 'user.zarr.inner_chunks="10,10"' in done.stdout.splitlines()
        assert {line.split("=")[0] for line in done.stdout.splitlines() if line.startswith("user.")} == (
            ARRAY_XATTRS | {"user.zarr.inner_chunks"})
        done = subprocess.run(["getfattr", "-d", "--absolute-names", str(mount.path / "a")],
                              capture_output=True, text=True, timeout=30)
        assert 'user.zarr.attributes="{\\"level\\": 1}"' in done.stdout.splitlines() or (
            re.search(r'^user\.zarr\.attributes=".*level.*1.*"$', done.stdout, re.M)), done.stdout


def test_setting_an_xattr_on_a_read_only_mount_is_erofs(tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "tree.zarr"
    nested(store)
    mount = mount_array(store, ["ro"])
    for path in (mount.path / "a/b/img", mount.path / "a/b/img/data", mount.path / "a/b", mount.path):
        with pytest.raises(OSError) as refused:
            os.setxattr(path, "user.zarr.attributes", b"{}")
        assert refused.value.errno == errno.EROFS, path
    assert json.loads(os.getxattr(mount.path / "a/b", "user.zarr.attributes")) == {"level": 2}
