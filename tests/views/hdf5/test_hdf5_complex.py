"""`data.h5` of complex arrays through real mounts: a compound {r, i} of two floats, as h5py
reads complex: h5py reads the values zarr-python reads (zstd chunks pass through with
`-o filters=plugins`, an unwritten one is the fill value); ncdump (netCDF-C's compound type)
dumps it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import h5py
import hdf5plugin  # (registers the zstd filter with h5py; its plugin directory for ncdump)
import numpy as np
import pytest
import zarr

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_h5py_reads_complex_as_zarr_python(tmp_path: Path, mount_array: Any, fmt: int, dtype: str) -> None:
    rng = np.random.default_rng(2)
    data = (rng.standard_normal((30, 20)) + 1j * rng.standard_normal((30, 20))).astype(dtype)
    data[20:, :10] = 0  # (the fill value: that chunk is not stored)
    array = zarr.create_array(tmp_path / "c.zarr", shape=data.shape, dtype=dtype, chunks=(10, 10),
                              zarr_format=fmt, fill_value=0)
    array[...] = data
    mount = mount_array(tmp_path / "c.zarr", ["ro", "filters=plugins"])
    with h5py.File(mount.path / "data.h5", "r") as f:
        assert f["data"].dtype == np.dtype(dtype)
        assert np.array_equal(f["data"][...], array[...])
        # (a chunk not stored points at the dataset's fill chunk, which lies before every other)
        chunk_at = f["data"].id.get_chunk_info_by_coord
        assert chunk_at((20, 0)).byte_offset < chunk_at((0, 0)).byte_offset
    env = {**os.environ, "HDF5_PLUGIN_PATH": hdf5plugin.PLUGINS_PATH}
    subprocess.run(["ncdump", str(mount.path / "data.h5")], check=True, capture_output=True, env=env)
