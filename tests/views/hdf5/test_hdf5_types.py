"""`data.h5` of arrays beyond rank >= 1 numbers, through real mounts: scalars (a contiguous
dataset of one element), bool (int8 and `dtype = "bool"`), datetime64 and timedelta64 (int64
and CF `units`) as xarray writes them to netCDF-4, and complex (a compound {r, i}), plain and
sharded. h5py, netCDF4, ncdump and h5dump read them, xarray as open_zarr."""

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


def assert_xarray_reads_as_open_zarr(store: Path, mount: Path, names: list[str]) -> None:
    """Each array's data.h5 opened by xarray with netcdf4 and h5netcdf: its variable `data`
    identical to open_zarr's variable of the array, the same `_FillValue` encoding."""
    expected = xr.open_zarr(store, consolidated=False)
    for engine in ("netcdf4", "h5netcdf"):
        for name in names:
            # (netCDF4-python reads a compound {r, i} as complex when asked: xarray's auto_complex)
            options = {"auto_complex": True} if engine == "netcdf4" else {}
            with xr.open_dataset(mount / name / "data.h5", engine=engine, **options) as got:
                wanted = expected[name].variable.to_base_variable()
                if wanted.dtype.kind in "Mm":  # (open_zarr of a v2 time leaves NaT undecoded)
                    wanted.attrs.pop("_FillValue", None)
                    xr.testing.assert_identical(got["data"].variable.to_base_variable(), wanted)
                    continue
                xr.testing.assert_identical(got["data"].variable.to_base_variable(), wanted)
                fills = got["data"].encoding.get("_FillValue"), expected[name].encoding.get("_FillValue")
                assert (fills[0] is None) == (fills[1] is None), (engine, name)


def assert_tools_read(path: Path) -> None:
    for tool in (["ncdump"], ["h5dump"]):
        subprocess.run([*tool, str(path)], check=True, capture_output=True)


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
def test_scalars(tmp_path: Path, mount_array: Any, fmt: int) -> None:
    """A scalar written and one not (its fill value) read as zarr-python reads them."""
    written = zarr.create_array(tmp_path / "w.zarr", shape=(), dtype=">f8", zarr_format=fmt,
                                fill_value=np.nan)
    written[...] = 3.5
    zarr.create_array(tmp_path / "f.zarr", shape=(), dtype="int16", zarr_format=fmt, fill_value=-3)
    for name, value in (("w.zarr", 3.5), ("f.zarr", -3)):
        mount = mount_array(tmp_path / name, ["ro"])
        with h5py.File(mount.path / "data.h5", "r") as f:
            assert f["data"].shape == () and f["data"][()] == value
        with netCDF4.Dataset(mount.path / "data.h5") as nc:
            assert nc["data"][...] == value
        assert_tools_read(mount.path / "data.h5")


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
def test_xarray_reads_scalars_as_open_zarr(tmp_path: Path, mount_array: Any, fmt: int) -> None:
    store = tmp_path / "s.zarr"
    xr.Dataset({"height": ((), np.float32(2.5), {"units": "m"}),
                "count": ((), np.int64(12))}).to_zarr(store, zarr_format=fmt, consolidated=False,
                                                     encoding={"count": {"_FillValue": -1}})
    mount = mount_array(store, ["ro"])
    assert_xarray_reads_as_open_zarr(store, mount.path, ["height", "count"])


def time_arrays(store: Path, fmt: int, shards: tuple[int, ...] | None) -> dict[str, np.ndarray[Any, Any]]:
    """Arrays of bool, datetime64[ns], timedelta64[s] with NaT, their last chunk not stored
    (the fill value), in one group with named dimensions."""
    rng = np.random.default_rng(3)
    seconds = rng.integers(0, 10**9, (20, 6))
    values = {"flag": seconds % 3 == 0,
              "time": (seconds * 10**9).astype("M8[ns]"),
              "wait": seconds.astype("m8[s]")}
    values["time"][2, 3] = values["wait"][4, 1] = np.datetime64("NaT")
    # (a v2 bool as xarray writes it: `fill_value: null`, read as False; open_zarr masks a False one)
    fills = {"flag": None if fmt == 2 else False, "time": np.datetime64("NaT"), "wait": np.timedelta64("NaT")}
    group = zarr.open_group(store, mode="w", zarr_format=fmt)
    for name, data in values.items():
        fill = fills[name]
        data[16:] = False if fill is None else fill
        kwargs: dict[str, Any] = {"dimension_names": ["y", "x"]} if fmt == 3 else \
            {"attributes": {"_ARRAY_DIMENSIONS": ["y", "x"]}}
        array = group.create_array(name, shape=data.shape, dtype=data.dtype, chunks=(4, 3), shards=shards,
                                   fill_value=fill, **kwargs)
        array[:16] = data[:16]
    return values


@pytest.mark.parametrize(("fmt", "shards"), [(2, None), (3, None), (3, (8, 6))],
                         ids=["v2", "v3", "v3-sharded"])
def test_bool_and_times(tmp_path: Path, mount_array: Any, fmt: int, shards: tuple[int, ...] | None) -> None:
    """h5py reads the numbers zarr-python's elements are; xarray (netcdf4, h5netcdf) decodes
    them as open_zarr reads the arrays; ncdump and h5dump read them."""
    store = tmp_path / "t.zarr"
    values = time_arrays(store, fmt, shards)
    mount = mount_array(store, ["ro"])
    for name, data in values.items():
        with h5py.File(mount.path / name / "data.h5", "r") as f:
            assert np.array_equal(f["data"][...], data.astype("i8").astype(f["data"].dtype))
        assert_tools_read(mount.path / name / "data.h5")
    assert_xarray_reads_as_open_zarr(store, mount.path, list(values))


@pytest.mark.parametrize(("fmt", "dtype", "shards"), [
    (2, "<c8", None), (2, ">c16", None), (3, "complex128", None), (3, "complex64", (8, 6)),
], ids=["v2-c8", "v2-big-c16", "v3-c16", "v3-sharded-c8"])
def test_complex(tmp_path: Path, mount_array: Any, fmt: int, dtype: str,
                 shards: tuple[int, ...] | None) -> None:
    """A compound {r, i}: h5py reads the complex numbers (zstd chunks decoded: in the mount's
    byte order), xarray as open_zarr; the last chunk not stored reads as the fill value."""
    rng = np.random.default_rng(4)
    data = (rng.standard_normal((20, 6)) + 1j * rng.standard_normal((20, 6))).astype(dtype)
    # (v2 as xarray writes it, `fill_value: null`: open_zarr masks a v2 fill value, which a
    # netCDF-4 reader of a compound `_FillValue` cannot; v3's it does not)
    fill = None if fmt == 2 else 1 - 2j
    data[16:] = 0 if fill is None else fill
    store = tmp_path / "c.zarr"
    group = zarr.open_group(store, mode="w", zarr_format=fmt)
    kwargs: dict[str, Any] = {"dimension_names": ["y", "x"]} if fmt == 3 else \
        {"attributes": {"_ARRAY_DIMENSIONS": ["y", "x"]}}
    array = group.create_array("z", shape=data.shape, dtype=data.dtype, chunks=(4, 3), shards=shards,
                               fill_value=fill, **kwargs)
    array[:16] = data[:16]
    mount = mount_array(store, ["ro"])
    with h5py.File(mount.path / "z" / "data.h5", "r") as f:
        assert f["data"].dtype == np.dtype(dtype).newbyteorder("<") and np.array_equal(f["data"][...], data)
    assert_tools_read(mount.path / "z" / "data.h5")
    assert_xarray_reads_as_open_zarr(store, mount.path, ["z"])
