"""`data.h5` of arrays of variable-length strings (v2 `vlen-utf8`, v3 `string`) through real
mounts: HDF5 variable-length UTF-8 strings (NetCDF-4's NC_STRING) in global heap collections,
in an array's file and among a group's datasets. h5py, netCDF4, h5netcdf, ncdump and h5dump
read them; xarray (both engines) as open_zarr."""

from __future__ import annotations

import json
import os
import struct
import subprocess
from pathlib import Path
from typing import Any

import h5py
import hdf5plugin  # (its plugin directory: the system's HDF5 of ncdump and h5dump reads blosc)
import netCDF4
import numcodecs
import numpy as np
import pytest
import xarray as xr
import zarr

from tests.helpers.hdf5_sources import named, string_array, strings
from tests.helpers.scale_arrays import RequestLog
from zarrfs.views.hdf5.vlen import ELEMENT

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
ENV = {**os.environ, "HDF5_PLUGIN_PATH": hdf5plugin.PLUGINS_PATH}


def read_h5py(path: Path) -> np.ndarray[Any, Any]:
    with h5py.File(path, "r") as f:
        return np.asarray(f["data"].asstr()[...], dtype=object)


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
def test_array_of_strings(tmp_path: Path, mount_array: Any, fmt: int) -> None:
    """Several chunks, an edge chunk, a chunk not stored, unicode and empty strings: h5py and
    netCDF4 read zarr-python's strings; ncdump and h5dump read the file."""
    data = strings((11, 7), seed=fmt)
    string_array(tmp_path / "s.zarr", fmt, data, (3, 4), ["y", "x"])
    mount = mount_array(tmp_path / "s.zarr", ["ro"])
    path = mount.path / "data.h5"
    assert json.loads(os.getxattr(mount.path, "user.zarr.views")) == ["data.txt", "data.h5"]
    assert np.array_equal(read_h5py(path), data)
    with netCDF4.Dataset(path) as nc:
        assert nc["data"].dimensions == ("y", "x")
        assert np.array_equal(np.asarray(nc["data"][...], dtype=object), data)
    assert_tools_read(path, "string data(y, x)", ", ".join(f'"{v}"' if v else "_" for v in data[-1]))


def assert_tools_read(path: Path, *dumped: str) -> None:
    """ncdump shows the texts `dumped` (an empty string as the default fill, `_`); h5dump reads
    the file."""
    shown = subprocess.run(["ncdump", str(path)], check=True, capture_output=True, text=True, env=ENV).stdout
    assert all(text in shown for text in dumped), shown[:2000]
    subprocess.run(["h5dump", str(path)], check=True, capture_output=True, env=ENV)


def assert_engines_read(group: Path, expected: xr.Dataset, arrays: tuple[str, ...]) -> None:
    """xarray with netcdf4 and h5netcdf reads the group's data.h5 as `expected` (open_zarr's
    reading) and each of `arrays`' own data.h5 as its variable."""
    for engine in ("netcdf4", "h5netcdf"):
        with xr.open_dataset(group / "data.h5", engine=engine) as got:
            xr.testing.assert_identical(got.load(), expected)
        for name in arrays:
            with xr.open_dataset(group / name / "data.h5", engine=engine) as got:
                xr.testing.assert_identical(got["data"].variable.to_base_variable(),
                                            expected[name].variable.to_base_variable())


def string_dataset(store: Path, fmt: int) -> xr.Dataset:
    """A dataset as xarray writes it: a string coordinate, a 2-D string variable and a number
    variable sharing its dimension, in several chunks; a string variable's last chunk not
    written."""
    station = np.array(["Zürich", "", "東京", "a\nb", "Óbidos", "x" * 300, "z"], dtype=object)
    names = strings((7, 3), seed=5)
    dataset = xr.Dataset({"name": (("station", "k"), names, {"long_name": "names"}),
                          "height": (("station",), np.arange(7, dtype="f8"))},
                         coords={"station": station}, attrs={"title": "strings"})
    encoding = {"name": {"chunks": (3, 2)}, "station": {"chunks": (2,)}}
    dataset.to_zarr(store, zarr_format=fmt, consolidated=False, encoding=encoding)
    return dataset


@pytest.mark.fast
@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
def test_xarray_reads_strings_as_open_zarr(tmp_path: Path, mount_array: Any, fmt: int) -> None:
    """The group's data.h5 (a string coordinate, dimensions shared) and each array's data.h5:
    xarray with netcdf4 and h5netcdf reads them as open_zarr; ncdump and h5dump read them."""
    store = tmp_path / "d.zarr"
    string_dataset(store, fmt)
    expected = xr.open_zarr(store, consolidated=False).load()
    mount = mount_array(store, ["ro"])
    assert_engines_read(mount.path, expected, ("name", "station"))
    assert_tools_read(mount.path / "data.h5", "string station(station)",
                      'station = "Zürich", _, "東京", "a\\nb"')


def test_bytes_are_left_out(tmp_path: Path, mount_array: Any) -> None:
    """Variable-length bytes keep data.txt alone (HDF5 has no netCDF type ncdump and h5netcdf
    read for them); the group's file holds the strings beside them."""
    group = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    blob = group.create_array("blob", shape=(3,), dtype=zarr.dtype.VariableLengthBytes(), chunks=(2,))
    blob[:] = np.array([b"a\x00", b"", b"\xff"], dtype=object)
    group.create_array("name", shape=(3,), dtype=str, chunks=(2,))[:] = np.array(["a", "", "b"])
    mount = mount_array(tmp_path / "g.zarr", ["ro"])
    assert sorted(p.name for p in (mount.path / "blob").iterdir()) == ["data.txt", "zarr.json"]
    with h5py.File(mount.path / "data.h5", "r") as f:
        assert list(f) == ["name"] and list(f["name"].asstr()[...]) == ["a", "", "b"]


def test_a_group_leaves_out_strings_of_many_chunks(tmp_path: Path, mount_array: Any) -> None:
    """`ls -l` of a group stats its data.h5, whose size needs every string's: an array of
    strings of variable length of more than 64 chunks is left out of it, so that stat reads
    none of their chunks; its own directory's data.h5 shows it. numpy `U` strings have a
    width, which sizes them without a read: such an array of 65 chunks is in."""
    group = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    labels = np.array([f"s{i}" for i in range(65)], dtype=object)
    group.create_array("many", shape=(65,), dtype=str, chunks=(1,))[:] = labels
    group.create_array("wide", shape=(65,), dtype="<U3", chunks=(1,))[:] = labels.astype("<U3")
    group.create_array("few", shape=(64,), dtype=str, chunks=(1,))[:] = labels[:64]
    mount = mount_array(tmp_path / "g.zarr", ["ro"])
    with h5py.File(mount.path / "data.h5", "r") as f:
        assert sorted(f) == ["few", "wide"] and list(f["few"].asstr()[...]) == list(labels[:64])
        assert list(f["wide"].asstr()[...]) == list(labels)
    assert list(read_h5py(mount.path / "many" / "data.h5")) == list(labels)


def test_unicode_strings_are_sized_without_a_read(tmp_path: Path, mount_array: Any) -> None:
    """numpy `U` strings are stored at their type's width (NUL-padded UTF-8, which readers
    end at the first NUL), so `ls -l` of their directory and of their group reads no chunk:
    with every chunk made unreadable the sizes are still known, and only reads of strings fail."""
    store = tmp_path / "g.zarr"
    group = zarr.open_group(store, mode="w", zarr_format=3)
    words = np.array([f"é{i}" for i in range(100)], dtype="<U4")
    group.create_array("wide", shape=(100,), dtype="<U4", chunks=(10,))[:] = words
    mount = mount_array(store, ["ro"])
    assert list(read_h5py(mount.path / "wide" / "data.h5")) == list(words)
    assert heap_strings(mount.path / "wide" / "data.h5") == [w.encode() for w in words[:10]]
    sizes = [os.stat(mount.path / name).st_size for name in ("data.h5", "wide/data.h5")]
    mount.unmount()
    chunks = sorted((store / "wide" / "c").rglob("*"))
    assert len([c for c in chunks if c.is_file()]) == 10
    for chunk in chunks:
        if chunk.is_file():
            chunk.write_bytes(b"not a chunk")
    mount = mount_array(store, ["ro"])
    assert [os.stat(mount.path / name).st_size for name in ("data.h5", "wide/data.h5")] == sizes
    with pytest.raises(OSError):
        read_h5py(mount.path / "wide" / "data.h5")


def test_ls_reads_each_chunk_of_strings_once(tmp_path: Path, mount_array: Any) -> None:
    """`ls -l` of an array of strings stats data.txt and data.h5, and each size needs every
    string's: the chunks the first read are kept for the second, not read again."""
    data = np.array([f"w{n}" for n in range(40)], dtype=object)
    zarr.create_array(tmp_path / "s.zarr", shape=(40,), dtype=str, chunks=(4,), zarr_format=3)[:] = data
    log = RequestLog(tmp_path / "requests.log")
    mount = mount_array(tmp_path / "s.zarr", ["ro"], env=log.env)
    log.take()
    listed = subprocess.run(["ls", "-l", mount.path], capture_output=True, text=True, check=True).stdout
    chunk_reads = [r.key for r in log.take() if r.kind in ("get", "get_range") and "/c/" in r.key]
    assert "data.txt" in listed and "data.h5" in listed
    assert sorted(chunk_reads) == sorted(set(chunk_reads)) and len(chunk_reads) == 10, chunk_reads
    assert list(read_h5py(mount.path / "data.h5")) == list(data)


def heap_strings(path: Path) -> list[bytes]:
    """The first chunk's strings as a reader of the file's bytes finds them (netCDF-Java,
    pyfive: no C string's NUL): each element's length, and its heap object's bytes."""
    with h5py.File(path, "r") as f:
        _, raw = f["data"].id.read_direct_chunk((0,))
    data, found = path.read_bytes(), []
    for length, address, number in np.frombuffer(raw, ELEMENT).tolist():
        at = address + 16  # (past the collection's header)
        while True:
            index, _, _, size = struct.unpack_from("<HHIQ", data, at)
            if index == number:
                assert size == length
                found.append(data[at + 16:at + 16 + size])
                break
            at += 16 + (size + 7) // 8 * 8
    return found


def test_many_and_long_strings_in_a_chunk(tmp_path: Path, mount_array: Any) -> None:
    """A chunk of 100,000 strings and one of 3 MB: more objects (65,535) and more bytes (1 MiB)
    than one heap collection holds here, so several, which h5py and netCDF4 read."""
    data = np.array([f"s{n}" for n in range(100_000)], dtype=object)
    data[70_000] = "long " * 600_000
    array = zarr.create_array(tmp_path / "m.zarr", shape=data.shape, dtype=str, chunks=(100_000,),
                              zarr_format=3)
    array[:] = data
    mount = mount_array(tmp_path / "m.zarr", ["ro"])
    assert np.array_equal(read_h5py(mount.path / "data.h5"), data)
    with netCDF4.Dataset(mount.path / "data.h5") as nc:
        assert nc["data"][70_000] == data[70_000] and nc["data"][99_999] == "s99999"


@pytest.mark.fast
@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
def test_unicode_as_variable_length(tmp_path: Path, mount_array: Any, fmt: int) -> None:
    """numpy `U` strings (UTF-32: no HDF5 or netCDF type) as variable-length UTF-8: xarray
    reads the group's file and the array's as open_zarr (the same str), h5py and netCDF4 the
    strings; a chunk not stored reads as the fill value."""
    store = tmp_path / "u.zarr"
    city = np.array(["Zürich", "", "東京", "🙂", "Óbidos", "a\nb", "z"], dtype="<U6")
    xr.Dataset({"count": (("city",), np.arange(7, dtype="i4"))}, coords={"city": city}).to_zarr(
        store, zarr_format=fmt, consolidated=False, encoding={"city": {"chunks": (3,)}})
    code = zarr.create_array(store / "code", shape=(5, 4), dtype="<U3", chunks=(2, 3), zarr_format=fmt,
                             fill_value="-", **named(fmt, ["y", "x"]))
    data = strings((5, 4), seed=7).astype("<U3")
    code[:4] = data[:4]
    data[4:] = "-"
    expected = xr.open_zarr(store, consolidated=False).load()
    mount = mount_array(store, ["ro"])
    assert np.array_equal(read_h5py(mount.path / "code" / "data.h5"), data.astype(object))
    with netCDF4.Dataset(mount.path / "city" / "data.h5") as nc:
        assert list(nc["data"][...]) == list(city)
    for engine in ("netcdf4", "h5netcdf"):
        with xr.open_dataset(mount.path / "data.h5", engine=engine) as got:
            xr.testing.assert_identical(got[["count", "city"]].load(), expected[["count", "city"]])
        with xr.open_dataset(mount.path / "city" / "data.h5", engine=engine) as got:
            xr.testing.assert_identical(got["data"].variable.to_base_variable(),
                                        expected["city"].variable.to_base_variable())
    assert_tools_read(mount.path / "data.h5", "string city(city)", 'city = "Zürich", _, "東京"')


@pytest.mark.parametrize(("fmt", "compressor"), [(2, "zstd"), (3, "zstd"), (3, "gzip")],
                         ids=["v2", "v3", "v3-decoded"])
def test_fixed_bytes_as_characters(tmp_path: Path, mount_array: Any, fmt: int, compressor: str) -> None:
    """numpy `S` bytes as netCDF characters of one more dimension (`stringN`): xarray reads the
    group's file and the array's back as the same bytes as open_zarr; zstd chunks pass
    through with `-o filters=plugins` (h5py's read_direct_chunk gives the stored chunk), gzip's
    are decoded; a chunk not stored reads as the fill value."""
    store = tmp_path / "b.zarr"
    code = np.array([b"ab", b"", b"\xc3\xa9t\xc3", b"wxyz", b"q", b"\x01\x02"], dtype="S4")
    codecs: Any = ({"compressors": [numcodecs.Zstd(level=1) if fmt == 2 else zarr.codecs.ZstdCodec()]}
                   if compressor == "zstd" else {"compressors": [zarr.codecs.GzipCodec()]})
    xr.Dataset({"code": (("site",), code), "n": (("site",), np.arange(6.0))}).to_zarr(
        store, zarr_format=fmt, consolidated=False, encoding={"code": {"chunks": (4,), **codecs}})
    (store / "code" / ("1" if fmt == 2 else "c/1")).unlink()  # (the fill value: empty)
    code[4:] = b""
    expected = xr.open_zarr(store, consolidated=False).load()
    assert list(expected["code"].values) == list(code)
    mount = mount_array(store, ["ro", "filters=plugins"])
    with h5py.File(mount.path / "code" / "data.h5", "r") as f:
        assert f["data"].shape == (6, 4) and f["data"][...].tobytes() == code.tobytes()
        stored = (store / "code" / ("0" if fmt == 2 else "c/0")).read_bytes()
        assert (f["data"].id.read_direct_chunk((0, 0))[1] == stored) == (compressor == "zstd")
    for engine in ("netcdf4", "h5netcdf"):
        with xr.open_dataset(mount.path / "data.h5", engine=engine) as got:
            xr.testing.assert_identical(got.load(), expected)
        with xr.open_dataset(mount.path / "code" / "data.h5", engine=engine) as got:
            xr.testing.assert_identical(got["data"].variable.to_base_variable(),
                                        expected["code"].variable.to_base_variable())
    assert_tools_read(mount.path / "data.h5", "char code(site, string4)", 'code =\n  "ab",')


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
def test_scalar_strings(tmp_path: Path, mount_array: Any, fmt: int) -> None:
    """Scalars of strings (variable-length, numpy `U`): a contiguous element, its string in a
    heap after it; xarray reads them as open_zarr, h5py and ncdump read them."""
    store = tmp_path / "s.zarr"
    xr.Dataset({"title": ((), np.array("Zürich 🙂", dtype=object)), "unit": ((), np.str_("m/s"))}).to_zarr(
        store, zarr_format=fmt, consolidated=False)
    expected = xr.open_zarr(store, consolidated=False).load()
    mount = mount_array(store, ["ro"])
    with h5py.File(mount.path / "title" / "data.h5", "r") as f:
        assert f["data"].shape == () and f["data"].asstr()[()] == "Zürich 🙂"
    for engine in ("netcdf4", "h5netcdf"):
        with xr.open_dataset(mount.path / "data.h5", engine=engine) as got:
            xr.testing.assert_identical(got.load(), expected)
    assert_tools_read(mount.path / "data.h5", 'title = "Zürich 🙂"', 'unit = "m/s"')


def test_v2_empty_fill_value_masks_as_open_zarr(tmp_path: Path, mount_array: Any) -> None:
    """zarr-python's v2 arrays of strings (vlen-utf8, `U`) and of `S` bytes state the fill
    value "", which open_zarr masks (xarray's `_ARRAY_DIMENSIONS`): `_FillValue` "" makes both
    engines mask the same elements; ncdump reads it."""
    group = zarr.open_group(tmp_path / "f.zarr", mode="w", zarr_format=2)
    for name, dtype in (("s", str), ("u", "<U2"), ("c", "S2")):
        array = group.create_array(name, shape=(4,), dtype=dtype, chunks=(2,), **named(2, ["x"]))
        array[:3] = np.array(["a", "", "b"]).astype(dtype)
    expected = xr.open_zarr(tmp_path / "f.zarr", consolidated=False).load()
    assert expected["s"].isnull().sum() == expected["c"].isnull().sum() == 2
    mount = mount_array(tmp_path / "f.zarr", ["ro"])
    for engine in ("netcdf4", "h5netcdf"):
        with xr.open_dataset(mount.path / "data.h5", engine=engine) as got:
            xr.testing.assert_identical(got.load(), expected)
    assert_tools_read(mount.path / "data.h5", 's = "a", "", "b", ""')


def test_a_fill_string_masks_as_open_zarr(tmp_path: Path, mount_array: Any) -> None:
    """A v2 array's stated fill value "NA" (strings of no fixed size and numpy `U`), which
    open_zarr masks: `_FillValue` "NA", its string in a heap collection among the file's
    metadata, makes both engines mask the same elements, in the array's file and the group's."""
    group = zarr.open_group(tmp_path / "f.zarr", mode="w", zarr_format=2)
    for name, dtype in (("s", str), ("u", "<U3")):
        array = group.create_array(name, shape=(6,), dtype=dtype, chunks=(2,), fill_value="NA",
                                   **named(2, ["x"]))
        array[:4] = np.array(["a", "NA", "", "b"]).astype(dtype)  # (the last chunk not stored)
    expected = xr.open_zarr(tmp_path / "f.zarr", consolidated=False).load()
    assert int(expected["s"].isnull().sum()) == int(expected["u"].isnull().sum()) == 3
    mount = mount_array(tmp_path / "f.zarr", ["ro"])
    assert_engines_read(mount.path, expected, ("s", "u"))
    assert_tools_read(mount.path / "data.h5", 's:_FillValue = "NA"')

