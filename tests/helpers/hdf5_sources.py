"""What the tests of `data.h5` (tests/views/hdf5/) write to read back: an xarray dataset of
weather (NaN, packed integers with a fill value, booleans, attributes), and arrays of
variable-length strings as zarr-python writes them (Unicode of 1 to 4 bytes a character, empty
strings, a long one), their dimensions named as xarray names them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import zarr


def weather_dataset() -> xr.Dataset:
    rng = np.random.default_rng(2)
    t2m = (rng.standard_normal((4, 6, 8)) * 10 + 280).astype("float32")
    t2m[0, 0, 0] = np.nan
    packed = rng.integers(-1000, 1000, (4, 6, 8)).astype("int16")
    packed[1, 2, 3] = -999  # (the fill value: masked)
    land = rng.integers(0, 2, (6, 8)).astype(bool)  # (bytes in netCDF-4, with xarray's mark)
    return xr.Dataset(
        {"t2m": (("time", "y", "x"), t2m,
                 {"units": "K", "long_name": "2 metre temperature", "levels": [1, 2]}),
         "sp": (("time", "y", "x"), packed, {"scale_factor": 0.5, "add_offset": 1000.0, "units": "hPa"}),
         "land": (("y", "x"), land)},
        coords={"y": np.arange(6.0), "x": np.arange(8.0) * 0.25},
        attrs={"title": "t"})


# Unicode of 1 to 4 bytes a character, empty strings, a long one (its own collection, past
# the smallest collection of 4096 bytes), text with a newline.
WORDS = ["", "a", "héllo", "日本語", "🙂 smile", "line\nbreak", "x" * 5000, "tab\tend", ""]


def strings(shape: tuple[int, ...], seed: int) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(seed)
    picked = rng.integers(0, len(WORDS), shape)
    return np.array([f"{WORDS[i]}{n}" if n % 5 else WORDS[i]
                     for n, i in enumerate(picked.reshape(-1))], dtype=object).reshape(shape)


def string_array(store: Path, fmt: int, data: np.ndarray[Any, Any], chunks: tuple[int, ...],
                 dims: list[str]) -> zarr.Array:
    """An array of strings as zarr-python writes it, its last chunk along the first axis not
    written (read as the fill value: empty)."""
    array = zarr.create_array(store, shape=data.shape, dtype=str, chunks=chunks, zarr_format=fmt,
                              fill_value=None if fmt == 2 else "", **named(fmt, dims))
    written = (data.shape[0] - 1) // chunks[0] * chunks[0]
    array[:written] = data[:written]
    data[written:] = ""
    return array


def named(fmt: int, dims: list[str]) -> dict[str, Any]:
    """zarr.create_array's arguments naming the dimensions as xarray does."""
    return {"dimension_names": dims} if fmt == 3 else {"attributes": {"_ARRAY_DIMENSIONS": dims}}
