"""Writes and the header views on a real mount: writes through a `np.load(..., mmap_mode="r+")`
map of `data.npy` landing in the store; the headers being read-only; headers following a
resize, read by the tools they are made for (numpy, pynrrd, SimpleITK, GDAL)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import hdf5plugin  # noqa: F401  (registers the zstd filter: data.h5 passes zstd chunks through)
import numpy as np
import pytest
import zarr
from zarr.codecs import BytesCodec

from tests.helpers.header_views import (
    HAS_GDAL,
    assert_bit_equal,
    read_gdal,
    read_nrrd,
    read_sitk,
    typed_values,
)

# -- writing through data.npy -----------------------------------------------------------------


def _store_array(path: Path, fmt: int, *, sharded: bool = False, big: bool = False) -> np.ndarray:
    values = typed_values("<i4", (20, 30), seed=fmt)
    if fmt == 2:
        array = zarr.create_array(path, shape=(20, 30), dtype=">i4" if big else "<i4", chunks=(8, 7),
                                  zarr_format=2, fill_value=0)
    else:
        array = zarr.create_array(path, shape=(20, 30), dtype="<i4", chunks=(4, 5),
                                  shards=(8, 15) if sharded else None, fill_value=0,
                                  serializer=BytesCodec(endian="big") if big else "auto")
    array[...] = values
    return values


@pytest.mark.parametrize(("fmt", "sharded", "options"), [
    (3, False, ()), (3, True, ("endian=big",)), (2, False, ("order=F",)),
    (3, True, ("order=F", "endian=big"))],
    ids=["v3", "v3-sharded-big", "v2-F", "v3-sharded-F-big"])
def test_npy_mmap_writes_land_in_the_store(tmp_path: Path, mount_array: Any, fmt: int, sharded: bool,
                                           options: tuple[str, ...]) -> None:
    path = tmp_path / "a.zarr"
    want = _store_array(path, fmt, sharded=sharded, big=fmt == 2)
    mount = mount_array(path, ["rw", *options])
    m = np.load(mount.path / "data.npy", mmap_mode="r+")
    assert m.shape == (20, 30) and np.array_equal(m, want)
    m[3, 4] = -12345
    m[17:20, 25:30] = 777  # an edge of the grid
    m[:, 0] = np.arange(20)
    m.flush()
    del m
    want[3, 4] = -12345
    want[17:20, 25:30] = 777
    want[:, 0] = np.arange(20)
    assert np.array_equal(np.load(mount.path / "data.npy"), want)
    assert mount.unmount() == 0
    assert np.array_equal(zarr.open_array(path, mode="r")[...], want)


def test_npy_header_is_read_only(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "a.zarr"
    want = _store_array(path, 3)
    mount = mount_array(path, ["rw"])
    npy = mount.path / "data.npy"
    raw = npy.read_bytes()
    header_size = len(raw) - want.nbytes
    assert header_size > 0 and header_size % 64 == 0
    header = raw[:header_size]
    with open(npy, "r+b", buffering=0) as f:
        # A changed byte in the header: refused.
        with pytest.raises(OSError) as changed:
            os.pwrite(f.fileno(), b"\x94", 0)
        assert changed.value.errno == errno.EPERM
        with pytest.raises(OSError) as shape_changed:
            os.pwrite(f.fileno(), header.replace(b"(20, 30)", b"(30, 20)"), 0)
        assert shape_changed.value.errno == errno.EPERM
        # The same bytes again (what a flushed map writes): accepted, and the data behind it too.
        assert os.pwrite(f.fileno(), header, 0) == header_size
        body = np.array([41, 42, 43], dtype="<i4").tobytes()
        assert os.pwrite(f.fileno(), header[-8:] + body, header_size - 8) == 8 + len(body)
        # The size is the array's: no truncating, no growing.
        with pytest.raises(OSError) as truncated:
            os.ftruncate(f.fileno(), header_size)
        assert truncated.value.errno == errno.EPERM
        with pytest.raises(OSError) as grown:
            os.pwrite(f.fileno(), b"\0\0\0\0", len(raw))
        assert grown.value.errno == errno.EFBIG
    assert npy.read_bytes()[:header_size] == header
    want.reshape(-1)[:3] = [41, 42, 43]
    assert mount.unmount() == 0
    assert np.array_equal(zarr.open_array(path, mode="r")[...], want)
    assert zarr.open_array(path, mode="r").shape == (20, 30)


def test_header_views_are_read_only(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "a.zarr"
    _store_array(path, 3)
    mount = mount_array(path, ["rw"])
    for name in ("data.raw.nhdr", "data.mhd", "data.vrt"):
        with pytest.raises(PermissionError):
            open(mount.path / name, "r+b").close()
        assert not os.access(mount.path / name, os.W_OK)


# -- headers after a resize ---------------------------------------------------------------------


@pytest.mark.parametrize("fortran", [False, True], ids=["C", "F"])
def test_headers_follow_a_resize(tmp_path: Path, mount_array: Any, fortran: bool) -> None:
    path = tmp_path / "a.zarr"
    want = _store_array(path, 3, sharded=True)
    mount = mount_array(path, ["rw", *(["order=F"] if fortran else [])])
    before = {name: (mount.path / name).read_bytes() for name in ("data.raw.nhdr", "data.mhd", "data.vrt")}
    # Keep 12 of 20 rows (C) or 18 of 30 columns (F: the last axis is data's slowest).
    new_shape = (20, 18) if fortran else (12, 30)
    os.truncate(mount.data, 4 * 20 * 18 if fortran else 4 * 12 * 30)
    cut = want[:, :18] if fortran else want[:12]
    assert np.load(mount.path / "data.npy").shape == new_shape
    assert np.array_equal(np.load(mount.path / "data.npy"), cut)
    for name, old in before.items():
        assert (mount.path / name).read_bytes() != old, name
    assert_bit_equal(read_nrrd(mount.path / "data.raw.nhdr", fortran)[0], cut)
    assert_bit_equal(read_sitk(mount.path / "data.mhd", fortran)[0], cut)
    if HAS_GDAL:
        assert_bit_equal(read_gdal(mount.path / "data.vrt", tmp_path, 2), cut)
    # Growing: new rows hold the fill value, the headers follow again.
    with open(mount.data, "ab") as f:
        f.write(np.full(20 if fortran else 30, 9, dtype="<i4").tobytes())
    grown = np.load(mount.path / "data.npy")
    if fortran:
        assert grown.shape == (20, 19) and np.array_equal(grown[:, :18], cut) and (grown[:, 18] == 9).all()
    else:
        assert grown.shape == (13, 30) and np.array_equal(grown[:12], cut) and (grown[12] == 9).all()
    assert_bit_equal(read_sitk(mount.path / "data.mhd", fortran)[0], grown)
    assert mount.unmount() == 0
    assert zarr.open_array(path, mode="r").shape == grown.shape
