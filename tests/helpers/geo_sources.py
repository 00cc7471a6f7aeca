"""An xarray dataset of weather on a latitude-longitude grid (as ERA5's), written to Zarr by
xarray, and what GDAL says of a file (`gdalinfo -json`), for the tests of the views that
place data on the Earth (tests/views/headers/test_geo_views.py, tests/views/tiff/)."""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

UTM33 = subprocess.run(["gdalsrsinfo", "-o", "wkt1", "EPSG:32633"], check=True, capture_output=True,
                       text=True).stdout.strip()


def gdalinfo(path: Path) -> dict[str, Any]:
    out = subprocess.run(["gdalinfo", "-json", str(path)], check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout))


def to_zarr(ds: xr.Dataset, path: Path, fmt: int) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # v3 consolidated metadata is "not in the spec yet"
        ds.to_zarr(path, zarr_format=fmt, consolidated=True, mode="w")
    return path


def weather(south_up: bool = False) -> xr.Dataset:
    rng = np.random.default_rng(1)
    lat = np.arange(45.0, 35.0, -0.5)[:: -1 if south_up else 1]
    lon = np.arange(-10.0, 5.0, 0.25, dtype=np.float32)  # float32 coordinates, as ERA5 ships them
    time = pd.date_range("2001-03-01", periods=3, freq="6h")
    t2m = (280 + rng.standard_normal((3, lat.size, lon.size)) * 5).astype("f4")
    t2m[0, 0, :3] = np.nan
    ds = xr.Dataset({"t2m": (("time", "lat", "lon"), t2m, {"units": "K"}),
                     "sp": (("time", "lat", "lon"), 1000 + rng.random((3, lat.size, lon.size)) * 50),
                     "mask": (("lat", "lon"), (t2m[0] > 280).astype("u1"))},
                    coords={"time": time, "lat": lat, "lon": lon})
    ds.lat.attrs.update(units="degrees_north", standard_name="latitude")
    ds["sp"].encoding = {"dtype": "int16", "scale_factor": 0.01, "add_offset": 1025.0, "_FillValue": -32768}
    ds["sp"][0, 1, 1] = np.nan
    return ds
