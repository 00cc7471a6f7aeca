"""`data.nc` in the classic format older readers open (issue 38, items 4 and 5): unsigned and
64-bit variables served as classic types holding their values exactly (`classic_types`),
CDF-5 only where a value needs it or `-o nc_format=cdf5` asks, and no `_FillValue` invented
for scalars. Datasets written by xarray itself are read back through real mounts by xarray
(against `open_zarr` of the source), ncdump, NCO's ncks, GDAL and R's ncdf4."""

from __future__ import annotations

import errno
import json
import subprocess
import warnings
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

from zarrfs.errors import MetadataError
from zarrfs.options import MountOptions, OptionError
from zarrfs.views.netcdf import CDF5
from zarrfs.views.netcdf.classic_types import classic_attribute, exactly_as, needs_values, served_type
from zarrfs.views.netcdf.header import NcDataset, NcLayout
from zarrfs.views.netcdf_model import NC_DOUBLE, NC_INT, NC_INT64, NC_UINT64, Attribute

FORMATS = [pytest.param(2, id="v2"), pytest.param(3, id="v3")]
WGS84 = ('GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563,AUTHORITY["EPSG","7030"]],'
         'AUTHORITY["EPSG","6326"]],PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433],'
         'AUTHORITY["EPSG","4326"]]')


# -- the types, without FUSE --------------------------------------------------------------------


@pytest.mark.fast
def test_classic_types_of_cdf5_types() -> None:
    served = {t: served_type(np.dtype(t)) for t in ("<u1", ">u2", "<u4", "<i8", "<u8", "<f4", "<i2", "S3")}
    assert served == {"<u1": ">i2", ">u2": ">i4", "<u4": ">f8", "<i8": ">f8", "<u8": ">f8",
                      "<f4": None, "<i2": None, "S3": None}  # (None: served as they are)
    assert [needs_values(np.dtype(t)) for t in ("<u2", "<u4", "<i8", ">u8", "<f8")] == [False, False, True,
                                                                                      True, False]


@pytest.mark.fast
def test_doubles_hold_values_exactly_or_reading_them_is_an_error() -> None:
    held = [np.array([0, -(2**53), 2**53, 2**31], "i8"), np.array([2**63 + 2**11, 7], "u8"),
            np.array([-(2**63), 1], "i8"),  # (xarray's NaT: -2^63 is a double)
            np.array([1_700_000_000 * 10**9], "i8"),  # (nanoseconds of a whole second, past 2^53)
            np.array([], "i8")]
    for values in held:
        np.testing.assert_array_equal(exactly_as(values, np.dtype(">f8")).astype(values.dtype), values)
    for values in (np.array([1, 2**53 + 1], "i8"), np.array([2**63 - 1], "i8"), np.array([2**64 - 1], "u8")):
        with pytest.raises(MetadataError, match=r"not a float64 exactly.*-o nc_format=cdf5"):
            exactly_as(values, np.dtype(">f8"))
    assert exactly_as(np.array([255, 0], "u1"), np.dtype(">i2")).tolist() == [255, 0]


@pytest.mark.fast
def test_64_bit_attributes_are_doubles_where_exact(tmp_path: Path) -> None:
    attributes = [Attribute.of("small", 2**40 // 2**20), Attribute.of("large", 2**40),
                  Attribute.of("nat", -(2**63)), Attribute.of("odd", 2**53 + 1), Attribute.of("u", 2**64 - 1)]
    classic = [classic_attribute(a) for a in attributes]
    assert [a.nc_type for a in attributes] == [NC_INT, NC_INT64, NC_INT64, NC_INT64, NC_UINT64]
    assert [a.nc_type for a in classic] == [NC_INT, NC_DOUBLE, NC_DOUBLE, NC_INT64, NC_UINT64]
    header = NcLayout(NcDataset((), (), tuple(classic[:3]))).header
    assert header[:4] == b"CDF\x02"
    (tmp_path / "attributes.nc").write_bytes(header)  # (netCDF-C opens no CDF-2 this small from memory)
    with netCDF4.Dataset(tmp_path / "attributes.nc") as nc:
        assert nc.small == 2**20 and nc.large == 2.0**40 and nc.nat == -(2.0**63)


@pytest.mark.fast
def test_the_option_parses() -> None:
    assert not MountOptions.parse([]).given[CDF5] and not MountOptions.parse(["nc_format=auto"]).given[CDF5]
    assert MountOptions.parse(["ro,nc_format=cdf5"]).given[CDF5]
    with pytest.raises(OptionError, match="nc_format='cdf2'"):
        MountOptions.parse(["nc_format=cdf2"])


# -- datasets xarray writes, through real mounts --------------------------------------------------


def _geo() -> xr.Dataset:
    """As rioxarray leaves a raster: a scalar grid mapping, y north-up, daily CF times."""
    rng = np.random.default_rng(7)
    time = pd.date_range("2023-06-01", periods=3, freq="D")
    y, x = np.arange(45.5, 40.0, -1.0), np.arange(5.5, 12.0, 1.0)
    t2m = (290 + rng.standard_normal((3, y.size, x.size)) * 4).astype("f4")
    ds = xr.Dataset(
        {"t2m": (("time", "y", "x"), t2m, {"units": "K", "long_name": "température à 2 m",
                                           "grid_mapping": "spatial_ref"}),
         "landcover": (("y", "x"), rng.integers(0, 256, (y.size, x.size)).astype("u1"),
                       {"flag_values": [0, 10, 255], "grid_mapping": "spatial_ref"})},
        coords={"time": time, "y": ("y", y, {"axis": "Y"}), "x": ("x", x, {"axis": "X"}),
                "spatial_ref": ((), 0, {"crs_wkt": WGS84, "spatial_ref": WGS84,
                                        "grid_mapping_name": "latitude_longitude",
                                        "GeoTransform": "5.0 1.0 0.0 46.0 0.0 -1.0"})},
        attrs={"Conventions": "CF-1.8", "title": "grille d'essai", "history": "made by xarray"})
    return ds


def _masked() -> xr.Dataset:
    """Masked and packed integers, times with a NaT, 64-bit ids past 32 bits, unsigned counts."""
    time = pd.date_range("2000-01-01", periods=4, freq="12h").values.copy()
    time[2] = np.datetime64("NaT")
    temperature = np.array([[12.25, np.nan], [-3.5, 40.0], [0.0, 1.5], [np.nan, 7.75]])
    ds = xr.Dataset(
        {"temperature": (("time", "station"), temperature, {"units": "degC"}),
         "count": (("time", "station"), np.array([[1.0, np.nan], [3, 4], [5, 6], [7, np.nan]])),
         "visits": (("station",), np.array([0, 65535], "u2")),
         "ids": (("station",), np.array([2**40 + 1, -(2**45)], "i8"), {"cf_role": "timeseries_id"})},
        coords={"time": time, "station": [101, 102]},
        attrs={"source": "test", "stations": 2, "total": 2**40})
    ds["temperature"].encoding = {"dtype": "int16", "scale_factor": 0.25, "add_offset": 10.0,
                                  "_FillValue": -32768}
    ds["count"].encoding = {"dtype": "int32", "_FillValue": -1}
    return ds


def _scalars() -> xr.Dataset:
    """Scalars of every kind xarray writes (a grid mapping, a time, a duration, a float, a
    flag), and model times of a noleap calendar (cftime)."""
    noleap = xr.date_range("2001-02-27", periods=3, freq="D", calendar="noleap", use_cftime=True)
    return xr.Dataset(
        {"field": (("lat",), np.array([1.0, 2.0], "f4"), {"grid_mapping": "crs"}),
         "offset": ((), 0.0), "level": ((), np.int64(0)), "valid": ((), True),
         "when": ((), np.datetime64("2020-02-29T12:00:00", "ns")),
         "lead": ((), np.timedelta64(36, "h").astype("timedelta64[ns]")),
         "model_time": (("step",), noleap)},
        coords={"lat": [10.0, 20.0], "crs": ((), 0, {"grid_mapping_name": "latitude_longitude",
                                                      "semi_major_axis": 6378137.0})})


DATASETS = {"geo": _geo, "masked": _masked, "scalars": _scalars}
SERVED_KINDS = {"u1": "i", "u2": "i", "u4": "f", "i8": "f", "u8": "f"}  # (as xarray reads them back)


def _to_zarr(ds: xr.Dataset, path: Path, fmt: int) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (xarray's notes on v3 and consolidated metadata)
        ds.to_zarr(path, zarr_format=fmt, mode="w", consolidated=False)
    return path


def _run(*args: str | Path) -> str:
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True).stdout


def _r_values(path: Path, name: str, raw: bool = True) -> list[str]:
    """The variable's values as R's ncdf4 reads them, in C order: as stored (`raw`), or
    unpacked with missing ones as NA."""
    script = (f'library(ncdf4); n <- nc_open("{path}"); '
              f'v <- ncvar_get(n, "{name}", raw_datavals = {str(raw).upper()}); '
              'cat(sprintf("%.17g", as.vector(v)), sep = "\\n")')
    return _run("Rscript", "-e", script).split()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", DATASETS)
def test_xarray_reads_classic_data_nc_as_open_zarr(name: str, fmt: int, tmp_path: Path,
                                                    mount_array: Any) -> None:
    source = _to_zarr(DATASETS[name](), tmp_path / f"{name}.zarr", fmt)
    path = mount_array(source).path / "data.nc"
    assert _run("ncdump", "-k", path).strip() == "64-bit offset"
    expected = xr.open_zarr(source, consolidated=False).load()
    with xr.open_dataset(path) as got:
        got.load()
        xr.testing.assert_identical(got, expected)  # values, CF times, masks, packing, attributes
        for variable in expected.variables:
            dtype = expected[variable].dtype
            assert got[variable].dtype.kind == SERVED_KINDS.get(dtype.str[1:], dtype.kind), variable


@pytest.mark.parametrize("fmt", FORMATS)
def test_older_readers_read_every_value_exactly(fmt: int, tmp_path: Path, mount_array: Any) -> None:
    source = _to_zarr(_masked(), tmp_path / "masked.zarr", fmt)
    path = mount_array(source).path / "data.nc"
    raw = xr.open_zarr(source, consolidated=False, mask_and_scale=False, decode_times=False).load()
    for name in ("temperature", "count", "visits", "ids", "time", "station"):
        got = np.array([float(v) for v in _r_values(path, name)])
        np.testing.assert_array_equal(got, raw[name].values.astype("f8").ravel(), name)
    ncks = json.loads(_run("ncks", "--json", "-v", "ids,visits,time", path))["variables"]
    assert ncks["ids"]["data"] == [2**40 + 1, -(2**45)] and ncks["visits"]["data"] == [0, 65535]
    dumped = _run("ncdump", "-h", path)
    assert "\tdouble ids(station) ;" in dumped and "\tint visits(station) ;" in dumped
    assert ":total = 1099511627776. ;" in dumped  # (an int64 attribute, as a double)


@pytest.mark.parametrize("fmt", FORMATS)
def test_gdal_and_r_read_a_grid_mapping_and_its_scalar(fmt: int, tmp_path: Path, mount_array: Any) -> None:
    ds = _geo()
    path = mount_array(_to_zarr(ds, tmp_path / "geo.zarr", fmt)).path / "data.nc"
    info = json.loads(_run("gdalinfo", "-json", f'NETCDF:"{path}":t2m'))
    assert info["size"] == [ds.x.size, ds.y.size] and len(info["bands"]) == ds.time.size
    assert 'GEOGCRS["WGS 84"' in info["coordinateSystem"]["wkt"]
    assert info["geoTransform"] == [5.0, 1.0, 0.0, 46.0, 0.0, -1.0]
    value = _run("gdallocationinfo", "-valonly", "-b", "2", f'NETCDF:"{path}":t2m', "3", "1").strip()
    assert np.float32(value) == ds.t2m.values[1, 1, 3]
    assert _r_values(path, "spatial_ref", raw=False) == ["0"]  # (a value, not NA)
    assert _r_values(path, "landcover", raw=False) == [str(v) for v in ds.landcover.values.ravel()]
    assert "spatial_ref = 0 ;" in _run("ncks", "-H", "-v", "spatial_ref", path)
    with netCDF4.Dataset(path) as nc:
        assert "_FillValue" not in nc["spatial_ref"].ncattrs() and nc["spatial_ref"][...] == 0


def test_a_value_no_double_holds_makes_cdf5(tmp_path: Path, mount_array: Any) -> None:
    times = np.array(["2021-01-01T00:00:00.000000001", "2021-01-01T00:00:00.5"], "datetime64[ns]")
    ds = xr.Dataset({"v": (("time",), [1.0, 2.0])}, coords={"time": times})
    ds.time.encoding = {"units": "nanoseconds since 1970-01-01", "dtype": "int64"}  # (past 2^53)
    source = _to_zarr(ds, tmp_path / "ns.zarr", 3)
    path = mount_array(source).path / "data.nc"
    assert _run("ncdump", "-k", path).strip() == "cdf5"
    with xr.open_dataset(path) as got:
        assert got.time.encoding["dtype"] == np.int64
        np.testing.assert_array_equal(got.time.values, times)


def test_cdf5_when_asked(tmp_path: Path, mount_array: Any) -> None:
    source = _to_zarr(_masked(), tmp_path / "masked.zarr", 3)
    path = mount_array(source, ["nc_format=cdf5"]).path / "data.nc"
    assert _run("ncdump", "-k", path).strip() == "cdf5"
    with netCDF4.Dataset(path) as nc:
        assert nc["ids"].dtype == np.int64 and nc["visits"].dtype == np.uint16 and nc.total == 2**40
    with xr.open_dataset(path) as got:
        xr.testing.assert_identical(got.load(), xr.open_zarr(source, consolidated=False).load())


def test_a_value_written_past_the_type_chosen_is_eio_until_reopened(tmp_path: Path, mount_array: Any) -> None:
    ds = xr.Dataset({"n": (("x",), np.arange(4, dtype="i8"))})
    mount = mount_array(_to_zarr(ds, tmp_path / "n.zarr", 3))
    with open(mount.path / "data.nc", "rb") as nc_file:  # (its types chosen: doubles hold 0..3)
        with open(mount.path / "n" / "data", "r+b") as data:  # (a value no double holds)
            data.write(np.array([2**53 + 1], "<i8").tobytes())
        with pytest.raises(OSError) as raised:  # (nothing of it was read before: not cached)
            nc_file.read()
    assert raised.value.errno == errno.EIO
    assert "is not a float64 exactly" in mount.log()
    with netCDF4.Dataset(mount.path / "data.nc") as nc:  # (opened again: its own type, in CDF-5)
        assert nc.data_model == "NETCDF3_64BIT_DATA"
        assert nc["n"].dtype == np.int64 and nc["n"][:].tolist() == [2**53 + 1, 1, 2, 3]


def test_another_writers_value_no_double_holds_makes_cdf5_at_the_next_open(tmp_path: Path,
                                                                           mount_array: Any) -> None:
    source = _to_zarr(xr.Dataset({"n": (("x",), np.arange(4, dtype="i8"))}), tmp_path / "w.zarr", 3)
    mount = mount_array(source)
    assert _run("ncdump", "-k", mount.path / "data.nc").strip() == "64-bit offset"
    zarr.open_array(source / "n", mode="r+")[3] = -(2**62) - 1  # (beyond 2^53, odd: no double)
    with netCDF4.Dataset(mount.path / "data.nc") as nc:
        assert nc.data_model == "NETCDF3_64BIT_DATA" and nc["n"][:].tolist() == [0, 1, 2, -(2**62) - 1]
