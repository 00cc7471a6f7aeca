"""`data.h5` of data written with zarr-python 3's and xarray's defaults, read by readers that
have no filter plugin (issue 76): zarr-python compresses with zstd unless told otherwise (v3;
v2 arrays of integers: blosc lz4), and xarray keeps those defaults; blosc, zstd and sharded
arrays too. On a default mount their chunks are
served decoded, so HDF5 1.8 (h5py 2.7.1), pyfive, jsfive, and Debian's `h5dump`, `ncdump`,
NCO and R (hdf5r, ncdf4) on HDF5 1.10, all with HDF5_PLUGIN_PATH unset, read the values
zarr-python reads, in each array's file and in the groups' files. With `-o filters=plugins`
the chunks pass through as stored: h5py with hdf5plugin reads them, `read_direct_chunk` the
stored bytes themselves."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import hdf5plugin  # noqa: F401  (h5py 3's zstd and blosc filters, for the pass-through option)
import numcodecs
import numpy as np
import pytest
import xarray as xr
import zarr

from tests.helpers.hdf5_sources import weather_dataset
from tests.helpers.mounting import mounted
from tests.helpers.old_hdf5_readers import READERS, Expected, as_held, assert_reads

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
ENV = {k: v for k, v in os.environ.items() if k != "HDF5_PLUGIN_PATH"}
ARRAYS = {3: ["default", "sharded", "blosc"], 2: ["default", "zstd"]}
# HDF5's filter for each array's chunks: zstd's (32015) or blosc's (32001), both plugins.
FILTERS = {(3, "default"): 32015, (3, "sharded"): 32015, (3, "blosc"): 32001, (2, "default"): 32001,
           (2, "zstd"): 32015}


def populate(root: Path, fmt: int) -> None:
    """A group of arrays with zarr-python's defaults (v3: zstd; v2: blosc), sharded (v3),
    blosc (v3) and zstd (v2), some chunks never written."""
    group = zarr.open_group(root, mode="w", zarr_format=fmt, attributes={"title": "defaults"})
    rng = np.random.default_rng(fmt)
    data = rng.integers(-10**6, 10**6, (100, 130)).astype("int32")
    data[64:, :64] = 0  # (the fill value: those chunks are not written)
    for name in ARRAYS[fmt]:
        kwargs: dict[str, Any] = {}
        if name == "sharded":
            kwargs["shards"] = (64, 128)
        elif name == "blosc":
            kwargs["compressors"] = zarr.codecs.BloscCodec()
        elif name == "zstd":
            kwargs["compressors"] = numcodecs.Zstd()
        names = ({"dimension_names": ["y", "x"]} if fmt == 3 else
                 {"attributes": {"_ARRAY_DIMENSIONS": ["y", "x"]}})
        array = group.create_array(name, shape=data.shape, dtype="int32", chunks=(32, 64), fill_value=0,
                                   **names, **kwargs)
        array[...] = data
        assert (array.store_path.store.root / name / ("c/1/0" if fmt == 3 else "1.0")).exists()
        assert not (array.store_path.store.root / name / ("c/3/0" if fmt == 3 else "3.0")).exists()


@dataclass(frozen=True)
class Source:
    store: Path
    mount: Path
    fmt: int

    @property
    def arrays(self) -> list[str]:
        return ARRAYS[self.fmt]

    def values(self, name: str) -> np.ndarray[Any, Any]:
        return np.asarray(zarr.open_array(self.store, path=name, mode="r")[...])


@pytest.fixture(scope="module", params=[3, 2], ids=["v3", "v2"])
def source(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    root = tmp_path_factory.mktemp(f"defaults_v{request.param}")
    populate(root / "g.zarr", request.param)
    with mounted(root / "g.zarr", root / "mnt", ["ro"]) as mount:
        yield Source(root / "g.zarr", mount.path, request.param)


def written_with(store: Path, name: str) -> str:
    """The codecs zarr-python wrote, as JSON (to check what its defaults are)."""
    return json.dumps(zarr.open_array(store, path=name, mode="r").metadata.to_dict(), default=str)


@pytest.mark.parametrize("reader", READERS)
def test_old_and_pure_readers_read_the_values(source: Source, tmp_path: Path, reader: str) -> None:
    """HDF5 1.8, pyfive and jsfive: each array's file and the group's, every dataset's values
    as zarr-python's, metadata as h5py 3 reads it."""
    default = written_with(source.store, "default")
    assert ('"zstd"' if source.fmt == 3 else '"blosc"') in default, default
    for name in source.arrays:
        expected = {"data": Expected(*as_held(source.values(name)))}
        assert_reads(reader, source.mount / name / "data.h5", expected, tmp_path / f"{name}.json")
    everything = {name: Expected(*as_held(source.values(name))) for name in source.arrays}
    assert_reads(reader, source.mount / "data.h5", everything, tmp_path / "group.json")


def run(*args: str | Path) -> str:
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True, env=ENV).stdout


def test_debian_tools_read_the_values(source: Source, tmp_path: Path) -> None:
    """h5dump, ncdump, NCO's ncks and R's hdf5r and ncdf4 on Debian's HDF5, no plugin path."""
    for name in source.arrays:
        path, data = source.mount / name / "data.h5", source.values(name)
        out = tmp_path / f"{name}.bin"
        run("h5dump", "-d", "/data", "-b", "LE", "-o", out, path)
        assert np.array_equal(np.fromfile(out, "<i4").reshape(data.shape), data), name
        got = json.loads(run("ncks", "--json", "-C", "-v", "data", path))
        assert np.array_equal(np.array(got["variables"]["data"]["data"]), data), name
        dump = run("ncdump", "-v", "data", path)
        body = dump[dump.index("data =", dump.index("data:")) + len("data ="):dump.rindex(";")]
        # (ncdump writes "_" for a value equal to _FillValue: 0, stated as v2's fill value)
        values = [0 if v.strip() == "_" else int(v) for v in body.replace("\n", " ").split(",")]
        assert np.array_equal(np.array(values), data.reshape(-1)), name
    group = source.mount / "data.h5"
    for script in (f'library(hdf5r); f <- H5File$new("{group}", mode = "r"); v <- f[["default"]][,]',
                   f'library(ncdf4); n <- nc_open("{group}"); '
                   'v <- ncvar_get(n, "default", raw_datavals = TRUE)'):
        printed = run("Rscript", "-e", f'{script}; cat(as.vector(v), sep = "\\n")')
        got = np.array(printed.split(), dtype=np.int64)
        # (R is column-major: its vector of the (x, y) matrix is the C-order vector of (y, x))
        assert np.array_equal(got, source.values("default").reshape(-1)), script


def test_xarray_defaults_read_by_every_reader_without_plugins(tmp_path: Path) -> None:
    """An xarray dataset written with `to_zarr`'s defaults (zstd; v3 and v2): the group's file
    read by HDF5 1.8, pyfive, jsfive, and ncks, every variable as xarray.open_zarr reads it."""
    for fmt in (3, 2):
        store = tmp_path / f"w{fmt}.zarr"
        weather_dataset().to_zarr(store, zarr_format=fmt, consolidated=False)
        expected = xr.open_zarr(store, consolidated=False, mask_and_scale=False).load()
        with mounted(store, tmp_path / f"mnt{fmt}", ["ro"]) as mount:
            path = mount.path / "data.h5"
            held = {name: Expected(*as_held(np.asarray(expected[name].values))) for name in ("t2m", "sp")}
            for reader in READERS:
                assert_reads(reader, path, held, tmp_path / f"{fmt}-{reader}.json")
            got = json.loads(run("ncks", "--json", "-C", "-v", "sp", path))
            assert np.array_equal(np.array(got["variables"]["sp"]["data"]), expected["sp"].values)


def test_plugins_option_passes_the_stored_chunks_through(source: Source, tmp_path: Path) -> None:
    """`-o filters=plugins`: zstd and blosc chunks (a shard's inner ones too) as stored, HDF5's
    filters 32015 and 32001 named; h5py with hdf5plugin reads the values, `read_direct_chunk`
    the stored bytes. On the default mount the same dataset has no filter."""
    with mounted(source.store, tmp_path / "plugins", ["ro", "filters=plugins"]) as mount:
        for name in source.arrays:
            with h5py.File(mount.path / name / "data.h5", "r") as f, \
                    h5py.File(source.mount / name / "data.h5", "r") as default:
                assert default["data"].compression is None and default["data"].id.get_create_plist(
                ).get_nfilters() == 0
                ident = f["data"].id.get_create_plist().get_filter(0)[0]
                assert ident == FILTERS[source.fmt, name], name
                assert np.array_equal(f["data"][...], source.values(name)), name
                mask, raw = f["data"].id.read_direct_chunk((32, 64))
                assert mask == 0 and raw == stored_inner_chunk(source.store, name, (1, 1)), name


def stored_inner_chunk(store: Path, name: str, chunk: tuple[int, int]) -> bytes:
    """A chunk's stored bytes: its file, or its bytes in its shard (the shard's index, at its
    end: an (offset, size) for each inner chunk, then a crc32c)."""
    array = zarr.open_array(store, path=name, mode="r")
    if array.metadata.zarr_format == 2:
        return (store / name / ".".join(map(str, chunk))).read_bytes()
    if name != "sharded":
        return (store / name / "c" / "/".join(map(str, chunk))).read_bytes()
    shard = (store / name / "c" / "0" / "0").read_bytes()  # (64 x 128: 2 x 2 inner chunks)
    index = np.frombuffer(shard[-(4 * 16 + 4):-4], "<u8").reshape(2, 2, 2)
    offset, size = (int(v) for v in index[chunk])
    return shard[offset:offset + size]
