"""Resizing an array through `data` on a real rw mount (TensorStore's resize semantics), with
zarr-python and TensorStore reading the store as the oracles: shrinking.

`truncate`/`ftruncate` to a whole number of rows sets shape[0]; `O_TRUNC` empties the array.
Shrinking deletes the chunks wholly outside the new shape and resets the cut part of the edge
chunks, so growing again (by zarrfs or by zarr-python itself) reads the fill value, never old
data.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from tests.helpers.resize_arrays import (
    FILL,
    KINDS,
    ROW,
    SHAPE,
    assert_store_holds,
    chunk_rows,
    create_resizable,
    read_data,
    read_tensorstore,
    read_zarr,
    stored_shape,
)

# -- truncate, shrink then grow -----------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_truncate_shrinks_and_growing_again_reads_the_fill_value(tmp_path: Path, mount_array: Any,
                                                               kind: str) -> None:
    path = tmp_path / "a.zarr"
    want = create_resizable(path, kind)
    assert chunk_rows(path, kind) == {"0", "1", "2"}
    mount = mount_array(path, ["rw"])
    metadata = mount.path / (".zarray" if kind == "v2" else "zarr.json")
    assert chunk_rows(mount.path / "chunks", kind) == {"0", "1", "2"}
    last = mount.chunk("2.0" if kind == "v2" else "c/2/0")
    assert last.stat().st_size > 0  # looked up: the kernel now knows the name

    os.truncate(mount.data, 5 * ROW)  # rows 0-4: the chunks of row 2 go, row 1 is cut
    assert mount.data.stat().st_size == 5 * ROW
    assert np.array_equal(read_data(mount), want[:5])
    assert json.loads(metadata.read_bytes())["shape"] == [5, 6]
    assert stored_shape(path, kind) == [5, 6]  # stored at once
    assert chunk_rows(mount.path / "chunks", kind) == {"0", "1"}
    assert chunk_rows(path, kind) == {"0", "1"}
    with pytest.raises(FileNotFoundError):
        last.stat()
    assert os.getxattr(mount.path, "user.zarr.shape") == b"5,6"

    os.truncate(mount.data, 10 * ROW)
    want[5:] = FILL
    assert np.array_equal(read_data(mount), want)
    assert chunk_rows(mount.path / "chunks", kind) == {"0", "1", "2"}
    assert last.stat().st_size > 0
    # The chunks of row 2 are not stored: they read as the fill value.
    assert chunk_rows(path, kind) == {"0", "1"}
    assert (np.fromfile(last, dtype="<i2") == FILL).all()
    assert mount.unmount() == 0
    assert_store_holds(path, kind, want)


@pytest.mark.parametrize("kind", KINDS)
def test_shrinking_and_growing_after_a_full_read_forgets_what_was_read(tmp_path: Path, mount_array: Any,
                                                                      kind: str) -> None:
    # Read first: the shard indexes (sharded arrays) of what the shrink deletes or rewrites
    # are known then, and must not be used once the array grows again.
    path = tmp_path / "a.zarr"
    want = create_resizable(path, kind)
    mount = mount_array(path, ["rw"])
    assert np.array_equal(read_data(mount), want)
    os.truncate(mount.data, 2 * ROW)
    os.truncate(mount.data, 10 * ROW)
    want[2:] = FILL
    assert np.array_equal(read_data(mount), want)
    assert mount.unmount() == 0
    assert_store_holds(path, kind, want)


@pytest.mark.parametrize("kind", KINDS)
def test_shrink_clears_the_cut_part_of_stored_chunks(tmp_path: Path, mount_array: Any, kind: str) -> None:
    """After a shrink by zarrfs, growing the array with zarr-python's own resize (which only
    rewrites the metadata) shows the fill value: the cut region was cleared in the store."""
    path = tmp_path / "a.zarr"
    want = create_resizable(path, kind)
    mount = mount_array(path, ["rw"])
    os.truncate(mount.data, 3 * ROW)
    assert mount.unmount() == 0
    assert_store_holds(path, kind, want[:3])
    array = zarr.open_array(path, mode="r+")
    array.resize(SHAPE)
    want[3:] = FILL
    assert np.array_equal(read_zarr(path), want)
    assert np.array_equal(read_tensorstore(path, kind), want)


def test_truncate_to_zero_and_o_trunc(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "a.zarr"
    create_resizable(path, "v3")
    mount = mount_array(path, ["rw"])
    with open(mount.data, "wb") as f:  # O_TRUNC: shape[0] = 0
        assert os.fstat(f.fileno()).st_size == 0
        assert stored_shape(path, "v3") == [0, 6]
        assert os.listdir(mount.path / "chunks" / "c") == []
        f.write(np.arange(12, dtype="<i2").tobytes())  # two rows again
    assert mount.data.stat().st_size == 2 * ROW
    assert np.array_equal(read_data(mount), np.arange(12).reshape(2, 6))
    assert mount.unmount() == 0
    assert_store_holds(path, "v3", np.arange(12, dtype=np.int16).reshape(2, 6))
    assert chunk_rows(path, "v3") == {"0"}
