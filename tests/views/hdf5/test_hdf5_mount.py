"""`data.h5` through real mounts: h5py (HDF5 2.x bundled), hdf5plugin for zstd, netCDF4 and
ncdump read the array's dataset as zarr-python reads the array; where the chunks are zlib
(or zstd, blosc, bzip2 with `-o filters=plugins`), `read_direct_chunk` returns the stored
chunk itself and the mount decodes nothing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import h5py
import hdf5plugin  # (registers the zstd filter with h5py; its plugin directory for GDAL)
import netCDF4
import numcodecs
import numcodecs.zarr3
import numpy as np
import pytest
import tifffile
import xarray as xr
import zarr
from zarr.codecs import BloscCodec, Crc32cCodec, ZstdCodec

from tests.helpers.hdf5_sources import weather_dataset
from tests.helpers.mounting import mount_stats as stats

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def make(path: Path, data: np.ndarray[Any, Any], chunks: tuple[int, ...], **kwargs: Any) -> zarr.Array:
    array = zarr.create_array(path, shape=data.shape, dtype=data.dtype, chunks=chunks, **kwargs)
    array[...] = data
    return array


def random(shape: tuple[int, ...], dtype: str) -> np.ndarray[Any, Any]:
    return np.random.default_rng(5).integers(0, 4000, shape).astype(dtype)


PLUGINS = ["ro", "filters=plugins"]  # (chunks of HDF5's plugin filters pass through too)


def stored(root: Path, chunk: tuple[int, ...], fmt: int) -> bytes:
    key = ("c/" if fmt == 3 else "") + ("/" if fmt == 3 else ".").join(map(str, chunk))
    return (root / key).read_bytes()


@pytest.mark.fast
@pytest.mark.parametrize(("fmt", "compressors", "options"), [
    (3, ZstdCodec(level=1), PLUGINS),
    (2, numcodecs.Zlib(level=1), ["ro"]),
], ids=["v3-zstd", "v2-zlib"])
def test_chunks_pass_through(tmp_path: Path, mount_array: Any, fmt: int, compressors: Any,
                             options: list[str]) -> None:
    """Each chunk of the dataset is the stored chunk; missing ones point at one chunk of fill
    values encoded as the stored ones are (every reader decodes it to the fill value); the
    dataset equals the array; nothing is decoded by the mount."""
    data = random((100, 130), "int32")
    data[64:, :64] = 7  # (the fill value: those chunks are not stored)
    array = make(tmp_path / "a.zarr", data, (32, 64), zarr_format=fmt, compressors=compressors, fill_value=7)
    mount = mount_array(tmp_path / "a.zarr", options)
    assert "data.h5" in {p.name for p in mount.path.iterdir()}
    with h5py.File(mount.path / "data.h5", "r") as f:
        dataset = f["data"]
        assert dataset.chunks == (32, 64) and dataset.fillvalue == 7
        for chunk in [(0, 0), (1, 2), (3, 1)]:
            mask, raw = dataset.id.read_direct_chunk((32 * chunk[0], 64 * chunk[1]))
            assert mask == 0 and raw == stored(tmp_path / "a.zarr", chunk, fmt)
        missing = [dataset.id.get_chunk_info_by_coord((row, 0)) for row in (64, 96)]
        assert missing[0].byte_offset == missing[1].byte_offset != dataset.id.get_chunk_info(0).byte_offset
        codec = numcodecs.Zstd() if fmt == 3 else numcodecs.Zlib()
        fill = np.frombuffer(codec.decode(dataset.id.read_direct_chunk((64, 0))[1]), "<i4")
        assert fill.size == 32 * 64 and set(fill.tolist()) == {7}
        assert np.array_equal(dataset[...], array[...])
    assert stats(mount.path)["chunks_decoded"] == 0
    with netCDF4.Dataset(mount.path / "data.h5") as nc:
        assert np.array_equal(nc["data"][...], data)
    kind = subprocess.run(["ncdump", "-k", str(mount.path / "data.h5")], check=True, capture_output=True,
                          text=True).stdout.strip()
    assert kind == "netCDF-4"


@pytest.mark.parametrize("dtype", ["uint8", ">u2", "<i8", "float32", ">f8", "float16"])
def test_decoded_chunks(tmp_path: Path, mount_array: Any, dtype: str) -> None:
    """Chunks HDF5 cannot take as stored (gzip's header here, edges partial) are decoded and
    served unfiltered: the dataset equals the array, edges and all."""
    data = random((37, 21, 5), dtype)
    make(tmp_path / "a.zarr", data, (8, 16, 5), zarr_format=2, compressors=numcodecs.GZip(), fill_value=0)
    mount = mount_array(tmp_path / "a.zarr", ["ro"])
    with h5py.File(mount.path / "data.h5", "r") as f:
        assert f["data"].compression is None
        assert np.array_equal(f["data"][...], data)
        assert np.array_equal(f["data"][9:30, 3:4, 1], data[9:30, 3:4, 1])


@pytest.mark.parametrize("options", [PLUGINS, ["ro"]], ids=["plugins", "builtin"])
def test_sharded_inner_chunks(tmp_path: Path, mount_array: Any, options: list[str]) -> None:
    """A shard's inner chunks are the dataset's chunks: zstd as stored with `filters=plugins`,
    else decoded by the mount and served with no filter."""
    data = random((64, 64), "uint16")
    make(tmp_path / "a.zarr", data, (8, 8), shards=(32, 32), compressors=ZstdCodec(level=1))
    mount = mount_array(tmp_path / "a.zarr", options)
    with h5py.File(mount.path / "data.h5", "r") as f:
        assert f["data"].chunks == (8, 8)
        assert (f["data"].compression is None) == (options != PLUGINS)
        assert np.array_equal(f["data"][...], data)
    assert (stats(mount.path)["chunks_decoded"] == 0) == (options == PLUGINS)


def test_many_chunks_paged_index(tmp_path: Path, mount_array: Any) -> None:
    """An index of more than 64 chunks is paged: a read of one chunk reads one page."""
    data = random((50, 2000), "uint8")
    make(tmp_path / "a.zarr", data, (1, 50), compressors=BloscCodec(cname="zstd"))
    make(tmp_path / "b.zarr", data, (1, 50), compressors=ZstdCodec(level=1))
    for name in ("a.zarr", "b.zarr"):
        mount = mount_array(tmp_path / name, ["ro"])
        with h5py.File(mount.path / "data.h5", "r") as f:
            assert np.array_equal(f["data"][...], data)
            assert np.array_equal(f["data"][37, 1900:], data[37, 1900:])


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
@pytest.mark.parametrize("engine", ["netcdf4", "h5netcdf"])
def test_xarray_reads_each_array_as_open_zarr(tmp_path: Path, mount_array: Any, fmt: int,
                                              engine: str) -> None:
    """Each array's data.h5 opened by xarray: the variable `data`, its dimensions named as the
    array's, its values (masked and unpacked as CF says) and attributes as xarray.open_zarr's."""
    store = tmp_path / "w.zarr"
    weather_dataset().to_zarr(store, zarr_format=fmt, consolidated=False,
                              encoding={"sp": {"_FillValue": -999}})
    expected = xr.open_zarr(store, consolidated=False)
    mount = mount_array(store, ["ro"])
    for name in ("t2m", "sp", "x", "land"):
        with xr.open_dataset(mount.path / name / "data.h5", engine=engine) as got:
            variable, wanted = got["data"], expected[name].variable
            assert variable.dims == wanted.dims, name
            xr.testing.assert_identical(variable.variable.to_base_variable(), wanted.to_base_variable())
            fills = got["data"].encoding.get("_FillValue"), wanted.encoding.get("_FillValue")
            assert (fills[0] is None) == (fills[1] is None), name
            assert fills[0] is None or np.array_equal(*np.asarray(fills, float), equal_nan=True), name


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
def test_an_integer_coordinate_from_zero_is_not_masked(tmp_path: Path, mount_array: Any, fmt: int) -> None:
    """xarray masks no array by a fill value it did not write as `_FillValue` (v3: none without
    the attribute; v2: `fill_value` null): an integer coordinate's 0 stays 0."""
    store = tmp_path / "z.zarr"
    xr.Dataset(coords={"z": np.arange(5) * 10}).to_zarr(store, zarr_format=fmt, consolidated=False)
    mount = mount_array(store, ["ro"])
    with xr.open_dataset(mount.path / "z" / "data.h5", engine="h5netcdf") as got:
        assert "_FillValue" not in got["data"].encoding
        assert np.array_equal(got["data"].values, np.arange(5) * 10)


@pytest.mark.parametrize("compressors", [numcodecs.Zlib(level=1), numcodecs.Zstd(level=1)],
                         ids=["zlib", "zstd"])
def test_gdal_reads_with_debian_hdf5(tmp_path: Path, mount_array: Any, compressors: Any) -> None:
    """GDAL (on the system's HDF5, 1.10 on Debian 12) reads the dataset through its netCDF and
    HDF5 drivers, zstd passed through (`filters=plugins`) with hdf5plugin's filter
    (HDF5_PLUGIN_PATH)."""
    data = random((60, 90), "uint16")
    make(tmp_path / "a.zarr", data, (32, 32), zarr_format=2, compressors=compressors, fill_value=0)
    mount = mount_array(tmp_path / "a.zarr", PLUGINS)
    env = {**os.environ, "HDF5_PLUGIN_PATH": hdf5plugin.PLUGINS_PATH}
    path = mount.path / "data.h5"
    # (GDAL's netCDF driver takes a grid without coordinates as bottom-up: its rows reversed)
    drivers = ((f'NETCDF:"{path}":data', slice(None, None, -1)), (f'HDF5:"{path}"://data', slice(None)))
    for source, rows in drivers:
        out = tmp_path / "out.tif"
        subprocess.run(["gdal_translate", "-q", source, str(out)], check=True, env=env)
        assert np.array_equal(tifffile.imread(out), data[rows]), source
        out.unlink()


@pytest.mark.parametrize("compressors", [numcodecs.Zlib(level=1), numcodecs.Zstd(level=1)],
                         ids=["zlib", "zstd"])
def test_h5dump_of_debian_hdf5_reads_the_values(tmp_path: Path, mount_array: Any, compressors: Any) -> None:
    """h5dump of HDF5 1.10 (Debian's hdf5-tools) dumps the dataset's values as the array's, zstd
    passed through (`filters=plugins`) with hdf5plugin's filter (HDF5_PLUGIN_PATH)."""
    data = random((50, 70), ">i4")
    make(tmp_path / "a.zarr", data, (16, 32), zarr_format=2, compressors=compressors, fill_value=0)
    mount = mount_array(tmp_path / "a.zarr", PLUGINS)
    env = {**os.environ, "HDF5_PLUGIN_PATH": hdf5plugin.PLUGINS_PATH}
    out = tmp_path / "values.bin"
    subprocess.run(["h5dump", "-d", "/data", "-b", "LE", "-o", str(out), str(mount.path / "data.h5")],
                   check=True, env=env, capture_output=True)
    assert np.array_equal(np.fromfile(out, "<i4").reshape(data.shape), data)


@pytest.mark.parametrize(("fmt", "filters", "compressors", "options"), [
    (2, [numcodecs.Shuffle(elementsize=4)], numcodecs.Zlib(level=1), ["ro"]),
    (2, [numcodecs.Shuffle(elementsize=4)], numcodecs.Zstd(level=1), PLUGINS),
    (2, [numcodecs.Shuffle(elementsize=4)], None, ["ro"]),
    (2, None, numcodecs.Zstd(level=1), PLUGINS),
    (2, None, numcodecs.Fletcher32(), ["ro"]),
    (3, None, [ZstdCodec(level=1), numcodecs.zarr3.Fletcher32()], PLUGINS),
    (2, None, numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.SHUFFLE), PLUGINS),
    (3, None, BloscCodec(cname="zstd"), PLUGINS),
    (2, [numcodecs.Shuffle(elementsize=4)], numcodecs.BZ2(level=5), PLUGINS),
], ids=["shuffle-zlib", "shuffle-zstd", "shuffle", "v2-zstd", "fletcher32", "zstd-fletcher32", "v2-blosc",
        "v3-blosc", "shuffle-bzip2"])
def test_shuffled_chunks_pass_through(tmp_path: Path, mount_array: Any, fmt: int, filters: Any,
                                      compressors: Any, options: list[str]) -> None:
    """numcodecs' byte shuffle of whole elements is HDF5's shuffle filter: such chunks are
    served as stored too (those of plugin filters with `filters=plugins`), and read as the
    array by h5py."""
    data = random((40, 50), "<f4")
    make(tmp_path / "a.zarr", data, (16, 16), zarr_format=fmt, filters=filters, compressors=compressors,
         fill_value=0)
    mount = mount_array(tmp_path / "a.zarr", options)
    with h5py.File(mount.path / "data.h5", "r") as f:
        mask, raw = f["data"].id.read_direct_chunk((16, 32))
        assert mask == 0 and raw == stored(tmp_path / "a.zarr", (1, 2), fmt)
        assert np.array_equal(f["data"][...], data)
    assert stats(mount.path)["chunks_decoded"] == 0


def test_a_crc32c_after_the_chunk_is_left_off(tmp_path: Path, mount_array: Any) -> None:
    """bytes, zstd, crc32c: the chunk served is the stored zstd frame without its checksum."""
    data = random((40, 50), "<u2")
    make(tmp_path / "a.zarr", data, (16, 16), compressors=[ZstdCodec(level=1), Crc32cCodec()], fill_value=0)
    mount = mount_array(tmp_path / "a.zarr", PLUGINS)
    with h5py.File(mount.path / "data.h5", "r") as f:
        mask, raw = f["data"].id.read_direct_chunk((16, 32))
        assert mask == 0 and raw == stored(tmp_path / "a.zarr", (1, 2), 3)[:-4]
        assert np.array_equal(f["data"][...], data)
    assert stats(mount.path)["chunks_decoded"] == 0


def test_views_option_selects_data_h5(tmp_path: Path, mount_array: Any) -> None:
    """`-o views=h5` shows data.h5 alone beside data; a selection without it leaves it out."""
    make(tmp_path / "a.zarr", random((20, 30), "uint8"), (8, 8))
    alone = mount_array(tmp_path / "a.zarr", ["ro,views=h5"])
    assert sorted(p.name for p in alone.path.iterdir()) == ["chunks", "data", "data.h5", "zarr.json"]
    without = mount_array(tmp_path / "a.zarr", ["ro,views=npy"])
    assert "data.h5" not in {p.name for p in without.path.iterdir()}
