"""Resizes a real rw mount refuses: a partial row (EINVAL), rank 0 (EINVAL), chunk files
(EPERM/EFBIG), and any resize on a read-only mount."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from tests.helpers.resize_arrays import (
    ROW,
    assert_store_holds,
    create_resizable,
    read_data,
    read_zarr,
    stored_shape,
)

# -- what cannot be resized -----------------------------------------------------------------------


@pytest.mark.fast
def test_partial_rows_are_refused(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "a.zarr"
    want = create_resizable(path, "v3")
    mount = mount_array(path, ["rw"])
    for size in (5 * ROW + 1, 10 * ROW - 2, 11 * ROW + 6):
        with pytest.raises(OSError) as refused:
            os.truncate(mount.data, size)
        assert refused.value.errno == errno.EINVAL
    assert "refused to change the size" in mount.log()
    assert mount.data.stat().st_size == 10 * ROW
    assert stored_shape(path, "v3") == [10, 6]
    assert np.array_equal(read_data(mount), want)


def test_rank_0_cannot_be_resized(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "scalar.zarr"
    zarr.create_array(path, shape=(), dtype="<i4", fill_value=3)[...] = 12
    mount = mount_array(path, ["rw"])
    for size in (0, 8):
        with pytest.raises(OSError) as refused:
            os.truncate(mount.data, size)
        assert refused.value.errno == errno.EINVAL
    with open(mount.data, "r+b") as f, pytest.raises(OSError) as grown:
        os.pwrite(f.fileno(), b"\1\0\0\0", 4)
    assert grown.value.errno in (errno.EFBIG, errno.EINVAL)
    assert mount.data.read_bytes() == np.int32(12).tobytes()
    assert mount.unmount() == 0
    assert read_zarr(path) == 12 and stored_shape(path, "v3") == []


@pytest.mark.fast
def test_chunk_files_keep_their_size(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "a.zarr"
    want = create_resizable(path, "v3-sharded")
    mount = mount_array(path, ["rw"])
    chunk = mount.chunk("c/1/0")
    size = chunk.stat().st_size
    assert size == 4 * 6 * 2
    for bad in (0, size - 2, size + ROW):
        with pytest.raises(OSError) as refused:
            os.truncate(chunk, bad)
        assert refused.value.errno == errno.EPERM
    with open(chunk, "r+b", buffering=0) as f, pytest.raises(OSError) as past:
        os.pwrite(f.fileno(), b"\0\0", size)
    assert past.value.errno == errno.EFBIG
    for name in ("zarr.json", "data.npy"):
        with pytest.raises(OSError) as fixed:
            os.truncate(mount.path / name, 0)
        assert fixed.value.errno in (errno.EPERM, errno.EACCES)
    assert mount.data.stat().st_size == 10 * ROW
    assert mount.unmount() == 0
    assert_store_holds(path, "v3-sharded", want)


def test_ro_mount_refuses_resizing(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "a.zarr"
    create_resizable(path, "v3")
    mount = mount_array(path, ["ro"])
    with pytest.raises(OSError) as refused:
        os.truncate(mount.data, 5 * ROW)
    assert refused.value.errno == errno.EROFS
    assert stored_shape(path, "v3") == [10, 6]
