"""`data.h5` of numpy times through real mounts: `datetime64` and `timedelta64` arrays are
int64 counts with CF `units` as xarray writes them, so xarray (netcdf4 and h5netcdf) reads
the same times as zarr-python, NaT and chunks never written (fill NaT) included; the chunks
are the stored ones (zstd: with `-o filters=plugins`)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import h5py
import numcodecs
import numpy as np
import pytest
import xarray as xr
import zarr
from zarr.codecs import ZstdCodec

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def times(dtype: str) -> np.ndarray[Any, Any]:
    counts = np.random.default_rng(3).integers(-10**6, 10**6, (40, 30))
    values = counts.astype(dtype.replace("M8", "m8")).astype(dtype)
    values[3, 4] = np.datetime64("NaT") if "M8" in dtype else np.timedelta64("NaT")
    values[20:, :16] = values.dtype.type("NaT")  # (the fill value: those chunks are not stored)
    return values


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
@pytest.mark.parametrize("dtype", ["<M8[ns]", "<m8[s]", "<M8[s]"])
@pytest.mark.parametrize("engine", ["netcdf4", "h5netcdf"])
def test_xarray_reads_the_times_zarr_python_reads(tmp_path: Path, mount_array: Any, fmt: int, dtype: str,
                                                  engine: str) -> None:
    data = times(dtype)
    array = zarr.create_array(tmp_path / "t.zarr", shape=data.shape, dtype=data.dtype, chunks=(10, 16),
                              zarr_format=fmt, fill_value="NaT",
                              compressors=ZstdCodec(level=1) if fmt == 3 else numcodecs.Zstd(level=1))
    array[...] = data
    mount = mount_array(tmp_path / "t.zarr", ["ro", "filters=plugins"])
    with xr.open_dataset(mount.path / "data.h5", engine=engine) as got:
        values = got["data"].values
        assert values.dtype.kind == data.dtype.kind
        assert np.array_equal(values.astype("i8"), array[...].astype(values.dtype).astype("i8"))
    with h5py.File(mount.path / "data.h5", "r") as f:
        assert np.array_equal(f["data"][...], array[...].view("i8"))
        # (a chunk not stored points at the dataset's fill chunk, which lies before every other)
        chunk_at = f["data"].id.get_chunk_info_by_coord
        assert chunk_at((30, 0)).byte_offset < chunk_at((0, 0)).byte_offset
    subprocess.run(["ncdump", "-h", str(mount.path / "data.h5")], check=True, capture_output=True)
