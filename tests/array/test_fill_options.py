"""TensorStore's zarr3 options of missing and fill-valued chunks, by its names and defaults,
through real mounts and against TensorStore itself: `fill_missing_data_reads=false` (a read
that touches a chunk that is not stored fails) and `store_data_equal_to_fill_value=true` (a
chunk written equal to the fill value is stored, not deleted)."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorstore as ts
import zarr

from tests.helpers.mounting import ZARRFS, MountFactory

SHAPE, CHUNKS = (8, 8), (4, 4)  # chunks c/0/0 and c/1/1 stored, c/0/1 and c/1/0 not


def half_stored(path: Path) -> np.ndarray:
    array = zarr.create_array(path, shape=SHAPE, chunks=CHUNKS, dtype="<u2", fill_value=7)
    values = np.full(SHAPE, 7, "<u2")
    values[:4, :4] = np.arange(16).reshape(4, 4) + 100
    values[4:, 4:] = np.arange(16).reshape(4, 4) + 200
    array[:4, :4], array[4:, 4:] = values[:4, :4], values[4:, 4:]
    assert sorted(p.relative_to(path).as_posix() for p in (path / "c").rglob("*") if p.is_file()) == \
        ["c/0/0", "c/1/1"]
    return values


def tensorstore(path: Path, **options: Any) -> Any:
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}, **options}
    return ts.open(spec, open=True).result()


def test_reads_of_missing_chunks_fail_when_asked(tmp_path: Path, mount_array: MountFactory) -> None:
    path = tmp_path / "a.zarr"
    values = half_stored(path)
    oracle = tensorstore(path, fill_missing_data_reads=False)
    assert np.array_equal(oracle[:4, :4].read().result(), values[:4, :4])
    with pytest.raises(ValueError, match=r"NOT_FOUND|not found|missing"):
        oracle[:4, 4:].read().result()

    # (direct_io: `data` read as asked, not by whole pages of the page cache)
    m = mount_array(path, ["fill_missing_data_reads=false", "direct_io"])
    row = SHAPE[1] * 2
    with open(m.data, "rb", buffering=0) as f:
        # the first four bytes of row 0: chunk c/0/0 only
        assert os.pread(f.fileno(), 8, 0) == values[0, :4].tobytes()
        with pytest.raises(OSError) as raised:
            os.pread(f.fileno(), row, 0)  # (its second half: c/0/1, not stored)
        assert raised.value.errno == errno.EIO
    assert m.chunk("c/1/1").read_bytes() == values[4:, 4:].tobytes()
    with pytest.raises(OSError) as raised:
        m.chunk("c/1/0").read_bytes()
    assert raised.value.errno == errno.EIO
    assert "c/1/0" in m.wait_for_log("fill_missing_data_reads")

    # Writes need no stored chunk: the written elements are merged with the fill value.
    with open(m.data, "r+b", buffering=0) as f:
        os.pwrite(f.fileno(), np.array([1, 2], "<u2").tobytes(), 4 * row)  # (row 4: c/1/0)
        os.fsync(f.fileno())
    expected = values.copy()
    expected[4, :2] = [1, 2]
    assert np.array_equal(zarr.open_array(path, mode="r")[...], expected)
    assert np.array_equal(tensorstore(path, fill_missing_data_reads=False)[4:, :4].read().result(),
                          expected[4:, :4])


@pytest.mark.parametrize("keep", [False, True], ids=["default", "stored"])
def test_chunks_written_equal_to_the_fill_value(tmp_path: Path, mount_array: MountFactory,
                                                keep: bool) -> None:
    path, oracle_path = tmp_path / "a.zarr", tmp_path / "oracle.zarr"
    half_stored(path)
    half_stored(oracle_path)
    fill = np.full(CHUNKS, 7, "<u2")
    oracle = tensorstore(oracle_path, store_data_equal_to_fill_value=keep)
    oracle[:4, :4].write(fill).result()
    m = mount_array(path, [f"store_data_equal_to_fill_value={str(keep).lower()}"])
    with open(m.chunk("c/0/0"), "r+b", buffering=0) as f:
        f.write(fill.tobytes())
        os.fsync(f.fileno())
    assert (path / "c/0/0").exists() == (oracle_path / "c/0/0").exists() == keep
    if keep:
        assert np.array_equal(zarr.open_array(path, mode="r")[:4, :4], fill)


def test_the_options_take_true_or_false(tmp_path: Path) -> None:
    path = tmp_path / "a.zarr"
    half_stored(path)
    (tmp_path / "mnt").mkdir()
    done = subprocess.run([ZARRFS, "mount", str(path), str(tmp_path / "mnt"), "-o",
                           "fill_missing_data_reads=maybe"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "fill_missing_data_reads='maybe'" in done.stderr, done.stderr
