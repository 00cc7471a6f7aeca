"""`data.nc` in every group directory: the header and byte-range math read back by netCDF-C
(netCDF4-python, from memory and from sparse files), then real mounts read by netCDF4-python,
xarray (against `open_zarr` of the source), `ncdump` and CDO."""

from __future__ import annotations

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

from zarrfs.array import Shared
from zarrfs.formats import discover
from zarrfs.store import Store
from zarrfs.tree import Tree
from zarrfs.views import array_dir
from zarrfs.views.netcdf.header import NcDataset, NcLayout, Variable
from zarrfs.views.netcdf_model import (
    NC_BYTE,
    NC_CHAR,
    NC_DOUBLE,
    NC_DTYPES,
    NC_FLOAT,
    NC_INT,
    NC_INT64,
    NC_SHORT,
    NC_UBYTE,
    NC_UINT64,
    NC_USHORT,
    Attribute,
    valid_name,
)

FORMATS = [pytest.param(2, id="v2"), pytest.param(3, id="v3")]


# -- the header and the byte-range math, without FUSE ------------------------------------------


def _dataset(values: dict[str, tuple[tuple[str, ...], int, np.ndarray]],
             dims: dict[str, int], attrs: tuple[Attribute, ...] = ()) -> NcDataset:
    variables = tuple(Variable(name, d, t, (Attribute.of("units", "m"),), v.nbytes)
                      for name, (d, t, v) in values.items())
    return NcDataset(tuple(dims.items()), variables, attrs)


def _file(layout: NcLayout, values: list[np.ndarray]) -> bytes:
    """The whole file, each variable's bytes at its begin (what the view serves piece by piece)."""
    out = bytearray(layout.size)
    out[: len(layout.header)] = layout.header
    for begin, value, variable in zip(layout.begins, values, layout.dataset.variables, strict=True):
        raw = value.astype(NC_DTYPES[variable.nc_type]).tobytes()
        out[begin : begin + len(raw)] = raw
    return bytes(out)


SMALL = {
    "b": (("x",), NC_BYTE, np.array([-3, 0, 5], "i1")),
    "s": (("x",), NC_SHORT, np.array([-300, 1, 7], "i2")),
    "c": (("x", "n"), NC_CHAR, np.array([b"ab", b"c", b"de"], "S2").view("S1").reshape(3, 2)),
    "f": (("y", "x"), NC_FLOAT, np.arange(6, dtype="f4").reshape(2, 3) / 3),
    "d": ((), NC_DOUBLE, np.array(2.5)),
    "i": (("y",), NC_INT, np.array([1, -(2**31)], "i4")),
}


@pytest.mark.fast
@pytest.mark.parametrize("wide", [False, True], ids=["cdf2", "cdf5"])
def test_netcdf_c_reads_the_header_and_data(wide: bool) -> None:
    values = dict(SMALL)
    if wide:
        values |= {"u8": (("x",), NC_UINT64, np.array([0, 2**63, 2**64 - 1], "u8")),
                   "i8": (("y",), NC_INT64, np.array([-(2**62), 3], "i8")),
                   "ub": (("y",), NC_UBYTE, np.array([0, 255], "u1")),
                   "us": (("x",), NC_USHORT, np.array([0, 1, 65535], "u2"))}
    layout = NcLayout(_dataset(values, {"x": 3, "n": 2, "y": 2},
                             (Attribute.of("title", "t"), Attribute.of("n", [1, 2]))))
    assert layout.version == (5 if wide else 2)
    assert all(begin % 4 == 0 for begin in layout.begins)
    with netCDF4.Dataset("inmemory.nc", memory=_file(layout, [v for _, _, v in values.values()])) as nc:
        assert nc.data_model == ("NETCDF3_64BIT_DATA" if wide else "NETCDF3_64BIT_OFFSET")
        assert nc.title == "t"
        assert list(nc.n) == [1, 2]
        for name, (dims, _, expected) in values.items():
            variable = nc[name]
            variable.set_auto_maskandscale(False)
            assert variable.dimensions == dims and variable.units == "m"
            np.testing.assert_array_equal(variable[...], expected)


@pytest.mark.fast
def test_pieces_cover_reads_across_header_variables_and_padding() -> None:
    layout = NcLayout(_dataset(SMALL, {"x": 3, "n": 2, "y": 2}))
    whole = _file(layout, [v for _, _, v in SMALL.values()])
    padded = [begin + -v.nbytes % 4 + v.nbytes
              for begin, v in zip(layout.begins, layout.dataset.variables, strict=True)]
    random = np.random.default_rng(0).integers(0, layout.size, (200, 2))
    reads = [(0, layout.size), (len(layout.header) - 2, 9), *random]
    for offset, size in reads:
        offset, size = int(offset), int(size)
        pieces = layout.pieces(offset, size)
        got = b"".join(layout.header[p.start : p.stop] if p.variable is None else
                       whole[layout.begins[p.variable] + p.start : layout.begins[p.variable] + p.stop]
                       for p in pieces)
        assert got == whole[offset : offset + size]
        for p in pieces:
            if p.variable is not None:
                assert 0 <= p.start < p.stop <= padded[p.variable] - layout.begins[p.variable]
    assert layout.pieces(layout.size, 10) == []
    # a read across the byte variable's padding into the short one: two pieces
    first = layout.begins[0]
    assert [p.variable for p in layout.pieces(first, 8)] == [0, 1]


@pytest.mark.fast
def test_a_variable_past_4_gib_makes_cdf5(tmp_path: Path) -> None:
    huge = 5 << 30
    variables = (Variable("big", ("x",), NC_FLOAT, (), huge), Variable("after", ("y",), NC_INT, (), 8))
    dataset = NcDataset((("x", huge // 4), ("y", 2)), variables, ())
    layout = NcLayout(dataset)
    assert layout.version == 5 and layout.size == len(layout.header) + huge + 8
    long = NcDataset((("n", 3 << 30),), (Variable("bytes", ("n",), NC_BYTE, (), 3 << 30),), ())
    assert NcLayout(long).version == 5  # (3 GiB fit CDF-2's sizes, not its 31-bit lengths)
    three = NcDataset((("n", 3 << 28),), (Variable("ints", ("n",), NC_INT, (), 3 << 30),), ())
    cdf2 = NcLayout(three)  # (a 3 GiB vsize: unsigned 32 bits)
    with open(tmp_path / "cdf2.nc", "wb") as f:
        f.write(cdf2.header)
        f.truncate(cdf2.size)
    with netCDF4.Dataset(tmp_path / "cdf2.nc") as nc:
        assert nc.data_model == "NETCDF3_64BIT_OFFSET" and nc["ints"].shape == (3 << 28,)
    path = tmp_path / "sparse.nc"
    with open(path, "wb") as f:
        f.write(layout.header)
        f.seek(layout.begins[1])
        f.write(np.array([7, 8], ">i4").tobytes())
    with netCDF4.Dataset(path) as nc:
        assert nc["big"].shape == (huge // 4,)
        assert list(nc["after"][:]) == [7, 8]
        assert nc["big"][-1] == 0


@pytest.mark.fast
def test_json_attributes_get_netcdf_types() -> None:
    attributes = {"text": "é ok", "flag": True, "small": 7, "large": 2**40, "unsigned": 2**63, "real": 0.5,
                  "ints": [1, -2], "mixed": [1, 2.5], "bools": [True, False], "nested": {"a": [1]},
                  "names": ["a", "b"], "nothing": None}
    types = {name: Attribute.of(name, value).nc_type for name, value in attributes.items()}
    assert types == {"text": NC_CHAR, "flag": NC_BYTE, "small": NC_INT, "large": NC_INT64,
                     "unsigned": NC_UINT64, "real": NC_DOUBLE, "ints": NC_INT, "mixed": NC_DOUBLE,
                     "bools": NC_BYTE, "nested": NC_CHAR, "names": NC_CHAR, "nothing": NC_CHAR}
    dataset = NcDataset((), (), tuple(Attribute.of(n, v) for n, v in attributes.items()))
    with netCDF4.Dataset("attrs.nc", memory=NcLayout(dataset).header) as nc:
        assert nc.text == "é ok" and nc.flag == 1 and nc.large == 2**40 and nc.unsigned == 2**63
        assert list(nc.mixed) == [1.0, 2.5] and nc.nested == '{"a": [1]}' and nc.nothing == "null"


@pytest.mark.fast
def test_names_netcdf_c_refuses() -> None:
    assert valid_name("t2m") and valid_name("2m_temperature") and valid_name("_x") and valid_name("é")
    assert not any(valid_name(n) for n in ("", "a/b", "-x", "x ", "a\x01"))


# -- through real mounts --------------------------------------------------------------------------


def _to_zarr(ds: xr.Dataset, path: Path, fmt: int) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (v3 fixed-length bytes are "not in the spec yet")
        ds.to_zarr(path, zarr_format=fmt, mode="w", consolidated=False)
    return path


def _climate() -> xr.Dataset:
    rng = np.random.default_rng(3)
    time = pd.date_range("2001-03-01", periods=4, freq="6h")
    lat, lon = np.arange(10.0, 16.0), np.arange(-5.0, 3.0, 0.5, dtype="f4")
    t2m = (280 + rng.standard_normal((4, lat.size, lon.size)) * 5).astype("f4")
    t2m[0, 0, :3] = np.nan
    ds = xr.Dataset(
        {"t2m": (("time", "lat", "lon"), t2m, {"units": "K", "long_name": "2 m temperature",
                                                "valid_range": [150.0, 350.0]}),
         "sp": (("time", "lat", "lon"), 1000 + rng.random((4, lat.size, lon.size)) * 50, {"units": "hPa"}),
         "count": (("lat", "lon"), rng.integers(0, 60000, (lat.size, lon.size)).astype("u2")),
         "ids": (("lat",), (np.arange(lat.size) * 2**40).astype("i8")),
         "land": (("lon",), np.arange(lon.size) % 3 == 0),
         "station": (("lat",), np.array([b"A1", b"B22", b"C", b"D", b"E", b"F"], "S3"))},
        coords={"time": time, "lat": lat, "lon": lon},
        attrs={"title": "test grid", "version": 3, "history": ["made", "kept"]})
    ds["sp"].encoding = {"dtype": "int16", "scale_factor": 0.01, "add_offset": 1025.0, "_FillValue": -32768}
    ds["sp"][0, 1, 1] = np.nan
    return ds


def _ncdump(*args: str | Path) -> str:
    return subprocess.run(["ncdump", *map(str, args)], check=True, capture_output=True, text=True).stdout


def _cdo(*args: str | Path) -> str:
    return subprocess.run(["cdo", "-s", *map(str, args)], check=True, capture_output=True, text=True).stdout


@pytest.mark.fast
@pytest.mark.parametrize("fmt", FORMATS)
def test_xarray_reads_data_nc_as_open_zarr_reads_the_store(fmt: int, tmp_path: Path,
                                                            mount_array: Any) -> None:
    source = _to_zarr(_climate(), tmp_path / "climate.zarr", fmt)
    mount = mount_array(source)
    path = mount.path / "data.nc"
    assert "data.nc" in {p.name for p in mount.path.iterdir()}
    expected = xr.open_zarr(source, consolidated=False).load()
    with xr.open_dataset(path) as got:
        got.load()
        assert got.attrs.pop("history") == '["made", "kept"]'  # (a list of text: its JSON)
        expected.attrs.pop("history")
        xr.testing.assert_identical(got, expected)  # values, dims, attributes, CF times, packing
        assert got.time.dtype.kind == "M" and got.land.dtype == bool and got.station.dtype == "S3"
        assert got.sp.encoding["dtype"] == np.int16 and got.sp.encoding["scale_factor"] == 0.01
    assert _ncdump("-k", path).strip() == "64-bit offset"  # (u2, i8 and the times' int64 in classic types)
    with netCDF4.Dataset(path) as nc:
        assert nc.data_model == "NETCDF3_64BIT_OFFSET"
        assert nc["count"].dtype == np.int32 and nc["ids"].dtype == np.float64
        assert nc["time"].dtype == np.float64
        np.testing.assert_array_equal(nc["count"][:], expected["count"].values)
        assert nc["sp"]._FillValue == -32768 and nc["sp"][0, 1, 1] is np.ma.masked
    assert "\t\tt2m:units = \"K\" ;" in _ncdump("-h", path).splitlines()
    assert "Unsupported" not in mount.log()


def test_cdf2_group_read_by_ncdump_and_cdo(tmp_path: Path, mount_array: Any) -> None:
    rng = np.random.default_rng(5)
    field = rng.random((3, 20, 30)).astype("f4")
    ds = xr.Dataset({"field": (("time", "y", "x"), field, {"units": "1"}),
                     "level": (("time",), np.array([1, 2, 3], "i2"))},
                    coords={"time": ("time", [0.0, 6.0, 12.0], {"units": "hours since 2020-01-01"}),
                            "y": np.arange(20.0), "x": np.arange(30.0)})
    source = _to_zarr(ds, tmp_path / "cdf2.zarr", 3)
    path = mount_array(source).path / "data.nc"
    assert _ncdump("-k", path).strip() == "64-bit offset"
    dumped = _ncdump("-v", "level", path)
    assert "level = 1, 2, 3 ;" in dumped and "short level(time) ;" in dumped
    sinfo = _cdo("sinfo", path)
    assert "NetCDF2" in sinfo and "points=600 (30x20)" in sinfo and "3 steps" in sinfo
    means = [float(line) for line in _cdo("outputf,%.9g", "-fldmean", "-selname,field", path).split()]
    np.testing.assert_allclose(means, field.reshape(3, -1).astype("f8").mean(axis=1), rtol=1e-6)


def test_arrays_netcdf_cannot_hold_are_left_out_and_named_once(tmp_path: Path, mount_array: Any) -> None:
    root = zarr.open_group(tmp_path / "mixed.zarr", mode="w", zarr_format=3, attributes={"note": "mixed"})
    root.create_array("names", shape=(2,), dtype=str)[:] = np.array(["a", "bb"])
    root.create_array("half", shape=(3,), dtype="f2")[:] = 1
    root.create_array("wave", shape=(3,), dtype="c8")[:] = 1j
    a = root.create_array("a", shape=(3,), dtype="i4", dimension_names=["x"], fill_value=0)
    a[:] = [1, 2, 3]
    b = root.create_array("b", shape=(4,), dtype="f8", dimension_names=["x"], fill_value=0)
    b[:] = 0.5
    plain = root.create_array("plain", shape=(2, 2), dtype="i2", fill_value=-9)
    plain[0] = 4
    root.create_array("scalar", shape=(), dtype="f8", fill_value=0)[()] = 2.5  # (rank 0: no dimensions)
    broken = root.create_array("broken", shape=(2,), dtype="i4", dimension_names=["x2"])
    doc = json.loads((tmp_path / "mixed.zarr" / "broken" / "zarr.json").read_text())
    doc["codecs"].append({"name": "lz5"})  # (no such codec: it cannot be opened)
    (tmp_path / "mixed.zarr" / "broken" / "zarr.json").write_text(json.dumps(doc))
    assert broken.shape == (2,)
    sub = root.create_group("sub")
    sub.create_array("v", shape=(5,), dtype="u1")[:] = np.arange(5)
    mount = mount_array(tmp_path / "mixed.zarr")
    for _ in range(2):
        with netCDF4.Dataset(mount.path / "data.nc") as nc:
            assert set(nc.variables) == {"a", "b", "plain", "scalar"} and nc.note == "mixed"
            assert nc["scalar"].dimensions == () and float(nc["scalar"][...]) == 2.5
            assert nc["b"].dimensions == ("x_4",) and list(nc["b"][:]) == [0.5] * 4
            assert nc["plain"].dimensions == ("plain_dim0", "plain_dim1") and nc["plain"]._FillValue == -9
            assert nc["plain"][1, 0] is np.ma.masked and not hasattr(nc["a"], "_FillValue")
    with netCDF4.Dataset(mount.path / "sub" / "data.nc") as nc:  # (unnamed dimensions: not xarray's)
        assert nc["v"]._FillValue == 0 and nc["v"][0] is np.ma.masked  # (the array's fill value)
        nc["v"].set_auto_mask(False)
        assert list(nc["v"][:]) == [0, 1, 2, 3, 4]
    log = mount.log()
    for name in ("names", "half", "wave", "broken"):
        assert log.count(f"data.nc leaves out array {name}:") == 1, log
    assert log.count("dimension x of length 3 is also met with length 4: named x_4") == 1


def test_views_option_turns_data_nc_off(tmp_path: Path, mount_array: Any) -> None:
    root = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=2)
    root.create_array("a", shape=(2,), dtype="i4")
    mount = mount_array(tmp_path / "g.zarr", ["views=npy"])
    assert not (mount.path / "data.nc").exists()
    assert "data.npy" in {p.name for p in (mount.path / "a").iterdir()}


def test_a_reopened_data_nc_shows_an_array_another_writer_resized(tmp_path: Path, mount_array: Any) -> None:
    root = zarr.open_group(tmp_path / "r.zarr", mode="w", zarr_format=3)
    array = root.create_array("a", shape=(4,), chunks=(2,), dtype="f4", dimension_names=["t"])
    array[:] = np.arange(4)
    mount = mount_array(tmp_path / "r.zarr")
    with netCDF4.Dataset(mount.path / "data.nc") as nc:
        assert nc["a"].shape == (4,)
    array.resize((6,))
    array[4:] = [4, 5]
    with netCDF4.Dataset(mount.path / "data.nc") as nc:
        np.testing.assert_array_equal(nc["a"][:], np.arange(6))


@pytest.mark.fast
def test_listing_and_sizing_data_nc_open_no_array(tmp_path: Path) -> None:
    """`ls -l` of a group of many arrays: the header comes from the metadata known, so no array
    is opened (no request per array on a remote store) until a variable's bytes are read."""
    root = zarr.open_group(tmp_path / "many.zarr", mode="w", zarr_format=3)
    for i in range(50):
        root.create_array(f"a{i}", shape=(3, 2), dtype="i2", dimension_names=["y", "x"])[:] = i
    store = Store.open(str(tmp_path / "many.zarr"))
    node = discover(store.get, "")
    assert node is not None
    tree = Tree(store, node, Shared(1 << 20, 1), array_dir.ViewSettings())
    assert "data.nc" in tree.names(tree.root)
    ref = tree.lookup(tree.root, "data.nc")
    assert ref is not None
    view = tree.file(ref)
    assert view.size > 50 * 12 and tree.opened_arrays() == []
    with netCDF4.Dataset("many.nc", memory=bytes(view.read(0, view.size))) as nc:
        assert len(nc.variables) == 50 and int(nc["a7"][2, 1]) == 7
    assert len(tree.opened_arrays()) == 50
    tree.close()
