"""An xarray dataset as a workspace: what a mount changes is what xarray reads afterwards
(through the consolidated metadata it trusts): attributes set with setfattr, a variable deleted
with rm -r, a variable moved with mv."""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from tests.helpers.mounting import MountFactory


def dataset() -> xr.Dataset:
    times = pd.date_range("2024-01-01", periods=3)
    values = np.arange(3 * 4 * 5, dtype="f4").reshape(3, 4, 5)
    return xr.Dataset({"t2m": (("time", "y", "x"), values, {"units": "K"}),
                       "rain": (("time", "y", "x"), values * 2, {"units": "mm"})},
                      coords={"time": times, "y": np.arange(4.0), "x": np.arange(5.0)})


def reopen(store: Path) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (zarr-python on consolidated metadata in v3)
        return xr.open_zarr(store, consolidated=True).load()


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_xarray_reads_what_the_mount_changed(tmp_path: Path, mount_array: MountFactory,
                                             zarr_format: int) -> None:
    store = tmp_path / "ds.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dataset().to_zarr(store, zarr_format=zarr_format, consolidated=True)
    mount = mount_array(store, ["rw"])

    # v2 keeps the dimension names among the attributes: a replacement must keep them.
    attributes = {"units": "degC", "long_name": "air temperature"}
    if zarr_format == 2:
        attributes["_ARRAY_DIMENSIONS"] = ["time", "y", "x"]
    subprocess.run(["setfattr", "-n", "user.zarr.attributes", "-v", json.dumps(attributes),
                    str(mount.path / "t2m")], check=True)
    subprocess.run(["rm", "-r", str(mount.path / "rain")], check=True)
    assert not (mount.path / "rain").exists()

    seen = reopen(store)
    assert set(seen.data_vars) == {"t2m"}
    assert seen["t2m"].attrs["units"] == "degC" and seen["t2m"].attrs["long_name"] == "air temperature"
    np.testing.assert_array_equal(seen["t2m"].values, dataset()["t2m"].values)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_xarray_reads_a_moved_variable(tmp_path: Path, mount_array: MountFactory, zarr_format: int) -> None:
    store = tmp_path / "ds.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dataset().to_zarr(store, zarr_format=zarr_format, consolidated=True)
    mount = mount_array(store, ["rw"])
    os.rename(mount.path / "rain", mount.path / "precipitation")
    seen = reopen(store)
    assert set(seen.data_vars) == {"t2m", "precipitation"}
    np.testing.assert_array_equal(seen["precipitation"].values, dataset()["rain"].values)
    assert seen["precipitation"].attrs["units"] == "mm"
