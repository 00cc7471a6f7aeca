"""Resizing an array through `data` on a real rw mount (TensorStore's resize semantics), with
zarr-python and TensorStore reading the store as the oracles: growing.

A write at or past the end (append, pwrite) grows the array by whole rows, the unwritten
elements holding the fill value; other fds see each resize; in Fortran order the last
dimension is the one resized.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.resize_arrays import (
    FILL,
    KINDS,
    ROW,
    SHAPE,
    assert_store_holds,
    chunk_rows,
    create_resizable,
    read_data,
    read_zarr,
    stored_shape,
)

# -- growing by writing ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_append_grows_by_whole_rows(tmp_path: Path, mount_array: Any, kind: str) -> None:
    path = tmp_path / "a.zarr"
    want = create_resizable(path, kind)
    mount = mount_array(path, ["rw"])
    new_chunk = mount.chunk("3.0" if kind == "v2" else "c/3/0")
    with pytest.raises(FileNotFoundError):  # looked up before it exists
        new_chunk.stat()
    added = np.arange(100, 115, dtype="<i2")  # 2.5 rows
    with open(mount.data, "ab") as f:
        f.write(added.tobytes())
        f.flush()
        os.fsync(f.fileno())
        assert os.fstat(f.fileno()).st_size == 13 * ROW
        grown = np.full((13, 6), FILL, dtype=np.int16)
        grown[:10] = want
        grown.reshape(-1)[60:75] = added
        # While mounted, after fsync: the store has the new shape and values.
        assert stored_shape(path, kind) == [13, 6]
        assert np.array_equal(read_zarr(path), grown)
    assert np.array_equal(read_data(mount), grown)
    assert chunk_rows(mount.path / "chunks", kind) == {"0", "1", "2", "3"}
    block = np.fromfile(new_chunk, dtype="<i2").reshape(4, -1)
    assert np.array_equal(block[:1], grown[12:13, : block.shape[1]]) and (block[1:] == FILL).all()
    # Appending again starts after the last whole row (whose end holds the fill value).
    with open(mount.data, "ab") as f:
        f.write(np.int16(999).tobytes())
    grown = np.concatenate([grown, np.full((1, 6), FILL, dtype=np.int16)])
    grown[13, 0] = 999
    assert mount.data.stat().st_size == 14 * ROW
    assert np.array_equal(read_data(mount), grown)
    assert mount.unmount() == 0
    assert_store_holds(path, kind, grown)


@pytest.mark.parametrize("kind", KINDS)
def test_pwrite_past_the_end(tmp_path: Path, mount_array: Any, kind: str) -> None:
    path = tmp_path / "a.zarr"
    want = create_resizable(path, kind)
    mount = mount_array(path, ["rw"])
    reader = os.open(mount.data, os.O_RDONLY)
    try:
        fd = os.open(mount.data, os.O_WRONLY)
        try:
            # Element [16, 2] and half of [16, 3]: a gap of 6 rows, then row 16, partly written.
            assert os.pwrite(fd, np.array([4242], dtype="<i2").tobytes() + b"\x11", 16 * ROW + 4) == 3
            os.fsync(fd)
            assert os.fstat(fd).st_size == 17 * ROW
        finally:
            os.close(fd)
        grown = np.full((17, 6), FILL, dtype=np.int16)
        grown[:10] = want
        grown[16, 2] = 4242
        grown[16, 3] = np.frombuffer(b"\x11" + np.int16(FILL).tobytes()[1:], dtype="<i2")[0]
        # An fd opened before the resize sees the new size and contents.
        assert os.fstat(reader).st_size == 17 * ROW
        assert os.pread(reader, 17 * ROW + 100, 0) == grown.tobytes()
        assert np.array_equal(read_zarr(path), grown)
        assert (mount.path / "data.npy").stat().st_size > 17 * ROW
        assert np.load(mount.path / "data.npy").shape == (17, 6)
    finally:
        os.close(reader)
    assert mount.unmount() == 0
    assert_store_holds(path, kind, grown)


def test_other_fds_see_each_resize(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "a.zarr"
    want = create_resizable(path, "v3-sharded")
    mount = mount_array(path, ["rw"])
    fds = [os.open(mount.data, os.O_RDONLY), os.open(mount.data, os.O_RDWR)]
    try:
        assert [os.fstat(fd).st_size for fd in fds] == [10 * ROW] * 2
        os.ftruncate(fds[1], 4 * ROW)
        assert [os.fstat(fd).st_size for fd in fds] == [4 * ROW] * 2
        assert os.stat(mount.data).st_size == 4 * ROW
        assert os.pread(fds[0], 10 * ROW, 0) == want[:4].tobytes()
        os.truncate(mount.data, 7 * ROW)
        assert [os.fstat(fd).st_size for fd in fds] == [7 * ROW] * 2
        grown = np.full((7, 6), FILL, dtype=np.int16)
        grown[:4] = want[:4]
        assert os.pread(fds[0], 10 * ROW, 0) == grown.tobytes()
    finally:
        for fd in fds:
            os.close(fd)
    assert mount.unmount() == 0
    assert_store_holds(path, "v3-sharded", grown)


# -- Fortran order ------------------------------------------------------------------------------


def test_fortran_order_resizes_the_last_dimension(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "a.zarr"
    want = create_resizable(path, "v3")
    mount = mount_array(path, ["rw", "order=F"])
    column = SHAPE[0] * 2
    os.truncate(mount.data, 4 * column)  # keep columns 0-3
    assert stored_shape(path, "v3") == [10, 4]
    flat = np.fromfile(mount.data, dtype="<i2")
    assert np.array_equal(flat.reshape((10, 4), order="F"), want[:, :4])
    with open(mount.data, "ab") as f:  # one more column, half written
        f.write(np.arange(500, 505, dtype="<i2").tobytes())
    grown = np.full((10, 5), FILL, dtype=np.int16)
    grown[:, :4] = want[:, :4]
    grown[:5, 4] = np.arange(500, 505)
    assert mount.unmount() == 0
    assert_store_holds(path, "v3", grown)
    again = mount_array(path, ["rw", "order=F"])
    with pytest.raises(OSError) as refused:  # a partial column, as a partial row in C order
        os.truncate(again.data, 4 * column + 2)
    assert refused.value.errno == errno.EINVAL
