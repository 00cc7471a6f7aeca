"""`data.h5` of a group directory through real mounts: an xarray Dataset written with
`to_zarr` (v2 and v3: coordinates, variables sharing dimensions, a subgroup, CF attributes)
read by xarray through netCDF4 and h5netcdf as xarray.open_zarr reads it, and by netCDF4,
h5py, ncdump, h5dump, GDAL's netCDF driver and NCO; its chunks are the stored chunks."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import h5py
import hdf5plugin
import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr

from tests.helpers.hdf5_sources import weather_dataset
from tests.helpers.mounting import MountFactory, mounted

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
ENV = {**os.environ, "HDF5_PLUGIN_PATH": hdf5plugin.PLUGINS_PATH}  # (zstd, for the system's HDF5)


def weather() -> xr.Dataset:
    """test_hdf5_mount's dataset (a NaN, a packed variable with a fill value) with CF
    coordinates, a time of its own, a mask sharing two of its dimensions and a scalar grid
    mapping."""
    dataset = weather_dataset().rename({"y": "lat", "x": "lon"})
    dataset["t2m"].attrs["standard_name"] = "air_temperature"
    dataset["mask"] = (("lat", "lon"), np.random.default_rng(3).integers(0, 2, (6, 8)).astype("uint8"),
                       {"flag_values": [0, 1]})
    dataset["lat"].attrs["units"] = "degrees_north"
    dataset["lon"].attrs["units"] = "degrees_east"
    dataset["crs"] = ((), np.int32(0), {"grid_mapping_name": "latitude_longitude"})  # (a scalar)
    time = ("time", np.arange(4, dtype="int32") * 6, {"units": "hours since 2020-01-01"})
    return dataset.assign_coords(time=time).assign_attrs(Conventions="CF-1.8")


def soundings() -> xr.Dataset:
    return xr.Dataset({"h": (("z",), np.arange(5.0) * 2, {"units": "m"}),
                       "w": (("z", "lon"), np.ones((5, 3), "float32"))},
                      coords={"z": ("z", np.arange(5) * 10)}, attrs={"site": "tower"})


def write(store: Path, fmt: int) -> None:
    weather().to_zarr(store, zarr_format=fmt, consolidated=False,
                      encoding={"sp": {"_FillValue": -999}, "t2m": {"chunks": (2, 3, 4)}})
    soundings().to_zarr(store, group="inner/deeper", zarr_format=fmt, consolidated=False)


@pytest.fixture(scope="module", params=[2, 3], ids=["v2", "v3"])
def dataset(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(the store, its mount, read-only)."""
    root = tmp_path_factory.mktemp(f"h5group{request.param}")
    write(root / "w.zarr", request.param)
    with mounted(root / "w.zarr", root / "mnt", ["ro"]) as mount:
        yield root / "w.zarr", mount.path


@pytest.mark.fast
@pytest.mark.parametrize("engine", ["netcdf4", "h5netcdf"])
@pytest.mark.parametrize("group", [None, "inner/deeper"])
def test_xarray_reads_the_group_as_open_zarr(dataset: tuple[Path, Path], engine: str,
                                             group: str | None) -> None:
    """Every variable, coordinate and attribute (CF unpacking and masking included) as
    xarray.open_zarr reads them, in the group and two levels below it."""
    store, mnt = dataset
    expected = xr.open_zarr(store, group=group, consolidated=False).load()
    with xr.open_dataset(mnt / "data.h5", engine=engine, group=group) as got:
        xr.testing.assert_identical(got.load(), expected)
        for name, variable in expected.variables.items():
            fills = got[name].encoding.get("_FillValue"), variable.encoding.get("_FillValue")
            assert (fills[0] is None) == (fills[1] is None), name


def test_chunks_and_dimension_scales(dataset: tuple[Path, Path], tmp_path: Path) -> None:
    """A variable's chunks are its array's chunks: xarray's zstd decoded by the mount (HDF5
    decodes zstd only through a plugin), or as stored with `-o filters=plugins`; a coordinate
    variable is its dimension's scale, attached to the variables that use it (DIMENSION_LIST
    and REFERENCE_LIST agree); a dimension without one is netCDF's phony scale."""
    store, mnt = dataset
    array = zarr.open_array(store / "t2m")
    key = "c/1/1/1" if array.metadata.zarr_format == 3 else "1.1.1"
    with mounted(store, tmp_path / "plugins", ["ro", "filters=plugins"]) as plugins, \
            h5py.File(plugins.path / "data.h5", "r") as f:
        mask, raw = f["t2m"].id.read_direct_chunk((2, 3, 4))
        assert mask == 0 and raw == (store / "t2m" / key).read_bytes()
    with h5py.File(mnt / "data.h5", "r") as f:
        t2m = f["t2m"]
        assert t2m.chunks == (2, 3, 4) and t2m.compression is None
        mask, raw = t2m.id.read_direct_chunk((2, 3, 4))
        assert mask == 0 and raw == np.ascontiguousarray(array[2:4, 3:6, 4:8], "<f4").tobytes()
        assert f["lat"].is_scale and f["lon"].is_scale and f["time"].is_scale
        assert [t2m.dims[i][0].name for i in range(3)] == ["/time", "/lat", "/lon"]
        attached = {(f[ref].name, int(axis)) for ref, axis in f["lon"].attrs["REFERENCE_LIST"]}
        assert attached == {("/t2m", 2), ("/sp", 2), ("/mask", 1), ("/land", 1)}
        inner = f["inner/deeper"]
        assert inner["w"].dims[1][0].name == "/inner/deeper/lon"  # (a dimension of the subgroup's own)
        assert inner["lon"].attrs["NAME"].startswith(b"This is a netCDF dimension but not a netCDF variable")
        assert [inner[ref].name for ref, _ in inner["lon"].attrs["REFERENCE_LIST"]] == ["/inner/deeper/w"]


def test_netcdf_tools_see_the_groups(dataset: tuple[Path, Path], tmp_path: Path) -> None:
    """netCDF4 (netCDF-C), ncdump, h5dump, NCO's ncks and GDAL's netCDF driver read the file,
    its groups and its variables."""
    _, mnt = dataset
    path = mnt / "data.h5"
    with netCDF4.Dataset(path) as nc:
        assert set(nc.groups) == {"inner"} and set(nc["inner"].groups) == {"deeper"}
        assert set(nc.dimensions) == {"time", "lat", "lon"} and nc.Conventions == "CF-1.8"
        assert nc["t2m"].dimensions == ("time", "lat", "lon")
        assert np.array_equal(nc["inner/deeper/h"][:], np.arange(5.0) * 2)

    def run(*command: str) -> str:
        return subprocess.run(command, check=True, capture_output=True, text=True, env=ENV).stdout

    header = run("ncdump", "-h", str(path))
    assert "group: deeper {" in header and "float t2m(time, lat, lon) ;" in header
    assert 'GROUP "deeper"' in run("h5dump", "-H", str(path))
    assert "sp:scale_factor = 0.5" in run("ncks", "-m", str(path))
    out = tmp_path / "t2m.nc"
    run("ncks", "-3", "-O", "-v", "t2m", str(path), str(out))  # (classic: Debian's netCDF-C writes no zstd)
    with netCDF4.Dataset(out) as nc, netCDF4.Dataset(path) as source:
        assert np.ma.allequal(nc["t2m"][:], source["t2m"][:])
    listed = json.loads(run("gdalinfo", "-json", f"NETCDF:{path}"))["metadata"]["SUBDATASETS"]
    names = {value for key, value in listed.items() if key.endswith("_NAME")}
    assert f'NETCDF:"{path}":t2m' in names and f'NETCDF:"{path}":/inner/deeper/w' in names


def test_one_name_of_two_lengths(tmp_path: Path, mount_array: MountFactory) -> None:
    """Arrays that give one dimension name two lengths (xarray refuses the Zarr group): the
    coordinate variable's length keeps the name, the other gets a dimension NAME_LENGTH; an
    array data.h5 cannot hold (raw bytes, numpy `V`) is left out, the others, a scalar and
    numpy `U` strings too, are there."""
    root = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    root.create_array("n", data=np.arange(4.0), dimension_names=["n"])
    root.create_array("a", data=np.arange(4, dtype="int32"), dimension_names=["n"])
    root.create_array("b", data=np.arange(6, dtype="int32"), dimension_names=["n"])
    root.create_array("scalar", data=np.array(5.0))
    root.create_array("label", data=np.array(["ab", "cd"], dtype="<U2"))
    root.create_array("raw", data=np.array([b"ab", b"cd"], dtype="V2"))
    mount = mount_array(tmp_path / "g.zarr", ["ro"])
    with xr.open_dataset(mount.path / "data.h5", engine="netcdf4") as got:
        assert set(got.variables) == {"n", "a", "b", "scalar", "label"} and float(got["scalar"]) == 5.0
        assert list(got["label"].values) == ["ab", "cd"]
        assert got["a"].dims == ("n",) and got["b"].dims == ("n_6",)
        assert np.array_equal(got["b"].values, np.arange(6))


def test_views_option_selects_the_group_file(tmp_path: Path, mount_array: MountFactory) -> None:
    """`views=h5` shows data.h5 in groups and arrays alike; a selection without it shows none."""
    root = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    root.create_group("sub").create_array("a", data=np.arange(6, dtype="uint8"))
    alone = mount_array(tmp_path / "g.zarr", ["ro,views=h5"])
    assert sorted(os.listdir(alone.path)) == ["data.h5", "sub", "zarr.json"]
    assert "data.h5" in os.listdir(alone.path / "sub") and "data.h5" in os.listdir(alone.path / "sub/a")
    without = mount_array(tmp_path / "g.zarr", ["ro,views=nc"])
    assert "data.h5" not in os.listdir(without.path) and "data.nc" in os.listdir(without.path)


def test_writes_and_new_arrays_show_in_the_group_file(tmp_path: Path, mount_array: MountFactory) -> None:
    """A write through an array's `data` and an array made in a new subgroup are in the group's
    data.h5 at its next open."""
    root = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    root.create_array("a", data=np.arange(100, dtype="uint8").reshape(10, 10), chunks=(5, 5))
    mount = mount_array(tmp_path / "g.zarr", ["rw"])
    with h5py.File(mount.path / "data.h5", "r") as f:
        assert list(f) == ["a"]
    with open(mount.path / "a" / "data", "r+b") as data:
        data.write(b"\xff\xfe")
    (mount.path / "sub").mkdir()
    np.save(tmp_path / "x.npy", np.arange(6, dtype="float32"))
    (mount.path / "sub" / "x.npy").write_bytes((tmp_path / "x.npy").read_bytes())
    with h5py.File(mount.path / "data.h5", "r") as f:
        assert list(f["a"][0, :3]) == [255, 254, 2]
        assert np.array_equal(f["sub/x"][...], np.arange(6, dtype="float32"))


@pytest.mark.parametrize("engine", ["netcdf4", "h5netcdf"])
def test_a_datatree_inherits_its_parents_dimensions(tmp_path: Path, mount_array: MountFactory,
                                                    engine: str) -> None:
    """A DataTree whose child uses its parent's coordinate (the child's Zarr group has no
    array `x`): the child's variable is attached to the parent's scale, as netCDF-4 groups see
    their parents' dimensions, and open_datatree reads the tree as from the store."""
    root = xr.Dataset({"t": (("x",), np.arange(4.0))}, coords={"x": [10, 20, 30, 40]}, attrs={"a": "root"})
    child = xr.Dataset({"u": (("x", "y"), np.ones((4, 2), "float32"))}, attrs={"a": "child"})
    xr.DataTree.from_dict({"/": root, "/child": child}).to_zarr(tmp_path / "t.zarr", consolidated=False)
    mount = mount_array(tmp_path / "t.zarr", ["ro"])
    expected = xr.open_datatree(tmp_path / "t.zarr", engine="zarr", consolidated=False).load()
    with xr.open_datatree(mount.path / "data.h5", engine=engine) as got:
        xr.testing.assert_identical(got.load(), expected)
    with h5py.File(mount.path / "data.h5", "r") as f:
        assert f["child/u"].dims[0][0].name == "/x" and "x" not in f["child"]


def test_sharded_and_decoded_arrays_of_a_group(tmp_path: Path, mount_array: MountFactory) -> None:
    """A group's datasets are its arrays' as their own files have them: a shard's inner chunks
    passed through (zstd: with `-o filters=plugins`), gzip chunks decoded by the mount; each
    equals zarr-python's array."""
    root = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    rng = np.random.default_rng(4)
    sharded = root.create_array("sharded", shape=(64, 64), chunks=(8, 8), shards=(32, 32), dtype="uint16",
                                compressors=zarr.codecs.ZstdCodec(level=1))
    sharded[...] = rng.integers(0, 4000, (64, 64))
    gzipped = root.create_group("sub").create_array("gzipped", shape=(37, 21), chunks=(8, 16), dtype=">f8",
                                                    compressors=zarr.codecs.GzipCodec())
    gzipped[...] = rng.standard_normal((37, 21))
    mount = mount_array(tmp_path / "g.zarr", ["ro", "filters=plugins"])
    with h5py.File(mount.path / "data.h5", "r") as f:
        assert f["sharded"].chunks == (8, 8) and f["sub/gzipped"].compression is None
        assert f["sharded"].id.get_create_plist().get_filter(0)[0] == 32015  # (zstd, as stored)
        assert np.array_equal(f["sharded"][...], sharded[...])
        assert np.array_equal(f["sub/gzipped"][...], gzipped[...])


def test_a_dimension_named_as_a_subgroup(tmp_path: Path, mount_array: MountFactory) -> None:
    """A dimension named as a subgroup cannot have a scale of that name beside it: the arrays
    naming it get netCDF's phony dimensions, and the file opens with the group and the array."""
    root = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    root.create_group("x").create_array("inside", data=np.arange(3, dtype="int16"))
    root.create_array("c", data=np.arange(6, dtype="int32").reshape(2, 3), dimension_names=["t", "x"])
    mount = mount_array(tmp_path / "g.zarr", ["ro"])
    with netCDF4.Dataset(mount.path / "data.h5") as nc:
        assert set(nc.groups) == {"x"} and len(nc["c"].dimensions) == 2 and "x" not in nc["c"].dimensions
        assert np.array_equal(nc["c"][:], np.arange(6).reshape(2, 3))
        assert np.array_equal(nc["x/inside"][:], np.arange(3))
