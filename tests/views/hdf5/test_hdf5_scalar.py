"""`data.h5` of a scalar (rank 0) through real mounts: a scalar dataset h5py, netCDF4, xarray
(netcdf4 and h5netcdf), ncdump and h5dump read as zarr-python reads the array; a scalar never
written reads as its fill value; a write through the mount shows in the file."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import h5py
import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
@pytest.mark.parametrize(("dtype", "value"), [("float64", 2.5), (">i4", -7), ("uint8", 200), ("bool", True)])
def test_a_scalar_is_a_scalar_dataset(tmp_path: Path, mount_array: Any, fmt: int, dtype: str,
                                      value: Any) -> None:
    """h5py and netCDF4 read the one value as zarr-python does; ncdump and h5dump succeed."""
    array = zarr.create_array(tmp_path / "s.zarr", shape=(), dtype=dtype, zarr_format=fmt, fill_value=0)
    array[...] = value
    mount = mount_array(tmp_path / "s.zarr", ["ro"])
    path = mount.path / "data.h5"
    assert "data.h5" in {p.name for p in mount.path.iterdir()}
    with h5py.File(path, "r") as f:
        assert f["data"].shape == () and f["data"][()] == array[()]
    with netCDF4.Dataset(path) as nc:
        assert nc["data"].dimensions == () and nc["data"][...] == value
    dump = subprocess.run(["ncdump", str(path)], check=True, capture_output=True, text=True).stdout
    assert "data =" in dump
    subprocess.run(["h5dump", str(path)], check=True, capture_output=True)


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
@pytest.mark.parametrize("engine", ["netcdf4", "h5netcdf"])
def test_xarray_reads_a_scalar_as_open_zarr(tmp_path: Path, mount_array: Any, fmt: int, engine: str) -> None:
    """A scalar variable of xarray's with attributes and a fill value: identical through data.h5."""
    store = tmp_path / "x.zarr"
    xr.Dataset({"t0": ((), np.float32(273.5), {"units": "K"})}).to_zarr(
        store, zarr_format=fmt, consolidated=False, encoding={"t0": {"_FillValue": -1.0}})
    expected = xr.open_zarr(store, consolidated=False)["t0"].variable
    mount = mount_array(store, ["ro"])
    with xr.open_dataset(mount.path / "t0" / "data.h5", engine=engine) as got:
        xr.testing.assert_identical(got["data"].variable.to_base_variable(), expected.to_base_variable())
        assert float(got["data"].encoding["_FillValue"]) == -1.0


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
def test_an_unwritten_scalar_reads_as_its_fill_value_and_a_write_shows(tmp_path: Path, mount_array: Any,
                                                                       fmt: int) -> None:
    zarr.create_array(tmp_path / "s.zarr", shape=(), dtype="int16", zarr_format=fmt, fill_value=-3)
    mount = mount_array(tmp_path / "s.zarr", [])
    with h5py.File(mount.path / "data.h5", "r") as f:
        assert f["data"][()] == -3 and f["data"].fillvalue == -3
    with open(mount.path / "data", "r+b") as data:
        data.write(np.int16(41).tobytes())
    with h5py.File(mount.path / "data.h5", "r") as f:
        assert f["data"][()] == 41
