"""More readers of `data.h5` through a real mount (issue 60), compared with zarr-python: NCO
(`ncks -m`, a hyperslab with `ncks -d`), `ncdump` (netCDF-C 4.9), and R (Debian's r-cran-ncdf4
and r-cran-hdf5r), all on Debian's HDF5 1.10. zlib chunks need no plugin, nor zstd chunks on a
default mount (served decoded); zstd chunks passed through as stored (`-o filters=plugins`)
need hdf5plugin's filter directory as HDF5_PLUGIN_PATH, which this test gives them only then."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import hdf5plugin
import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import ZstdCodec

FILL = 7
HYPERSLAB = (slice(60, 70), slice(50, 80))  # (rows 60..69 cross into the missing chunks)
Mounted = tuple[Path, np.ndarray[Any, Any], dict[str, str]]  # data.h5, its values, the readers' env


def source(path: Path, fmt: int, compressors: Any) -> np.ndarray[Any, Any]:
    data = np.random.default_rng(5).integers(0, 4000, (100, 130)).astype("int32")
    data[64:, :64] = FILL  # (those chunks are not stored: read as the fill value)
    names = {"dimension_names": ["y", "x"]} if fmt == 3 else {"attributes": {"_ARRAY_DIMENSIONS": ["y", "x"]}}
    array = zarr.create_array(path, shape=data.shape, dtype="int32", chunks=(32, 64), zarr_format=fmt,
                              compressors=compressors, fill_value=FILL, **names)
    array[...] = data
    assert np.array_equal(zarr.open_array(path, mode="r")[...], data)
    return data


@pytest.fixture(params=[(3, "zstd", False), (3, "zstd", True), (2, "zlib", False)],
                ids=["v3-zstd", "v3-zstd-plugins", "v2-zlib"])
def mounted_h5(request: pytest.FixtureRequest, tmp_path: Path,
               mount_array: Any) -> tuple[Path, np.ndarray[Any, Any], dict[str, str]]:
    fmt, codec, plugins = request.param
    compressors = ZstdCodec(level=1) if codec == "zstd" else numcodecs.Zlib(level=1)
    data = source(tmp_path / "a.zarr", fmt, compressors)
    env = dict(os.environ)
    env.pop("HDF5_PLUGIN_PATH", None)
    if plugins:
        env["HDF5_PLUGIN_PATH"] = hdf5plugin.PLUGINS_PATH
    options = ["ro", "filters=plugins"] if plugins else ["ro"]
    return mount_array(tmp_path / "a.zarr", options).path / "data.h5", data, env


def run(env: dict[str, str], *args: str | Path) -> str:
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True, env=env).stdout


def test_nco_reads_the_header_and_a_hyperslab(mounted_h5: Mounted) -> None:
    path, data, env = mounted_h5
    header = run(env, "ncks", "-m", path)
    assert re.search(r"int data\(y,x\)", header) and "y = 100" in header and "x = 130" in header, header
    rows, columns = HYPERSLAB
    got = json.loads(run(env, "ncks", "--json", "-C", "-v", "data", "-d", f"y,{rows.start},{rows.stop - 1}",
                         "-d", f"x,{columns.start},{columns.stop - 1}", path))
    assert np.array_equal(np.array(got["variables"]["data"]["data"]), data[HYPERSLAB])


def test_ncdump_reads_every_value(mounted_h5: Mounted) -> None:
    path, data, env = mounted_h5
    assert run(env, "ncdump", "-k", path).strip() == "netCDF-4"
    dump = run(env, "ncdump", "-v", "data", path)
    body = dump[dump.index("data =", dump.index("data:")) + len("data ="):dump.rindex(";")]
    # (ncdump writes "_" for a value equal to _FillValue)
    values = [FILL if v.strip() == "_" else int(v) for v in body.replace("\n", " ").split(",")]
    assert np.array_equal(np.array(values).reshape(data.shape), data)


def test_r_ncdf4_and_hdf5r_read_a_hyperslab(mounted_h5: Mounted) -> None:
    """R's arrays are column-major: R's (x, y) is the array's (y, x). ncdf4 gives the fill
    value as NA unless asked for the stored values (raw_datavals)."""
    path, data, env = mounted_h5
    rows, columns = HYPERSLAB
    ncdf4 = (f'library(ncdf4); n <- nc_open("{path}"); '
             f'v <- ncvar_get(n, "data", start = c({columns.start + 1}, {rows.start + 1}), '
             f'count = c({columns.stop - columns.start}, {rows.stop - rows.start}), raw_datavals = TRUE); '
             'cat(as.vector(v), sep = "\\n")')
    hdf5r = (f'library(hdf5r); f <- H5File$new("{path}", mode = "r"); '
             f'v <- f[["data"]][{columns.start + 1}:{columns.stop}, {rows.start + 1}:{rows.stop}]; '
             'cat(as.vector(v), sep = "\\n")')
    for script in (ncdf4, hdf5r):
        got = np.array(run(env, "Rscript", "-e", script).split(), dtype=np.int64)
        # (R's column-major vector of an (x, y) block is the C-order vector of the (y, x) block)
        assert np.array_equal(got.reshape(rows.stop - rows.start, columns.stop - columns.start),
                              data[HYPERSLAB]), script
