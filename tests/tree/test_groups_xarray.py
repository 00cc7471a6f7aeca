"""Hierarchies written by xarray on a real mount, with xarray as the oracle: datasets (Zarr v2
and v3, consolidated or not) read, listed, edited through the mount, and `zarrfs info` on them
(what xarray puts in the store: tests/helpers/group_checks.py)."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

from tests.helpers.group_checks import (
    assert_data,
    assert_enoent,
    assert_metadata_files_as_stored,
    contains_run,
    info_lines,
    numbers,
    tree,
    xattrs,
    zarrfs,
)
from tests.helpers.mounting import without_views

# -- xarray datasets ----------------------------------------------------------------------------

TIMES = pd.date_range("2021-03-01", periods=20, freq="h")


def _dataset() -> xr.Dataset:
    temp = np.arange(600, dtype="f4").reshape(20, 30) * 0.25 - 40
    temp[8:16, 16:30] = np.nan  # chunk (1, 1) is all fill value: not stored
    return xr.Dataset(
        {"temp": (("y", "x"), temp, {"units": "K", "long_name": "temperature"})},
        coords={"time": ("y", TIMES), "x": ("x", np.arange(30, dtype="i4") * 10)},
        attrs={"title": "zarrfs test", "version": 3},
    )


@pytest.mark.parametrize("consolidated", [True, False], ids=["consolidated", "listed"])
@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
def test_xarray_dataset(fmt: int, consolidated: bool, tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "ds.zarr"
    ds = _dataset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # consolidated metadata "not part of the v3 spec"
        ds.to_zarr(store, zarr_format=fmt, consolidated=consolidated,
                   encoding={"temp": {"chunks": (8, 16)}})
    if fmt == 2:
        root_meta = {".zgroup", ".zattrs"} | ({".zmetadata"} if consolidated else set())
        array_meta = {".zarray", ".zattrs"}
        temp_chunks = {f"{i}.{j}" for i in range(3) for j in range(2)}
        one_chunk = {"0"}
        assert not (store / "temp" / "1.1").exists()
    else:
        root_meta, array_meta = {"zarr.json"}, {"zarr.json"}
        temp_chunks = {"c/", *(f"c/{i}/" for i in range(3)),
                       *(f"c/{i}/{j}" for i in range(3) for j in range(2))}
        one_chunk = {"c/", "c/0"}
        assert not (store / "temp" / "c" / "1" / "1").exists()
        assert ("consolidated_metadata" in json.loads((store / "zarr.json").read_bytes())) == consolidated
    assert {p.name for p in store.iterdir() if p.is_file()} == root_meta

    mount = mount_array(store, ["ro"])
    assert set(os.listdir(mount.path)) == root_meta | {"data.nc", "data.h5", "temp", "time", "x"}
    for name in ("temp", "time", "x"):
        assert without_views(os.listdir(mount.path / name)) == sorted(array_meta | {"data", "chunks"})
    assert tree(mount.path / "temp" / "chunks") == temp_chunks
    for name in ("time", "x"):
        assert tree(mount.path / name / "chunks") == one_chunk
    assert_metadata_files_as_stored(mount.path, store)

    # The raw stored values, as xarray (no decoding) and zarr-python read them.
    raw = xr.open_zarr(store, decode_times=False, mask_and_scale=False, consolidated=consolidated)
    group = zarr.open_group(store, mode="r")
    for name in ("temp", "time", "x"):
        expected = raw[name].values
        assert np.array_equal(expected, group[name][...], equal_nan=True)
        assert_data(mount.path / name / "data", expected)
    assert raw["time"].dtype == np.int64 and raw["time"].attrs["units"].startswith("hours since 2021-03-01")

    # The datetime coordinate is CF-encoded: int64 hours since the first time.
    hours = np.fromfile(mount.path / "time" / "data", dtype="<i8")
    assert hours.tolist() == list(range(20))
    assert np.array_equal(np.datetime64("2021-03-01T00", "h") + hours.astype("m8[h]"), TIMES.values)
    assert np.fromfile(mount.path / "x" / "data", dtype="<i4").tolist() == list(range(0, 300, 10))

    # The unstored chunk reads as the fill value (NaN), a stored edge chunk as data + overhang.
    missing = np.fromfile(mount.path / "temp" / ("chunks/1.1" if fmt == 2 else "chunks/c/1/1"), dtype="<f4")
    assert missing.size == 8 * 16 and np.isnan(missing).all()
    edge = np.fromfile(mount.path / "temp" / ("chunks/2.1" if fmt == 2 else "chunks/c/2/1"),
                       dtype="<f4").reshape(8, 16)
    values = ds["temp"].values
    assert np.array_equal(edge[:4, :14], values[16:20, 16:30])
    assert np.isnan(edge[4:, :]).all() and np.isnan(edge[:, 14:]).all()

    # Extended attributes of the variable and of the dataset (the root group).
    attrs = xattrs(mount.path / "temp")
    assert attrs["user.zarr.shape"] == "20,30"
    assert attrs["user.zarr.dtype"] == "<f4"
    assert attrs["user.zarr.chunks"] == "8,16"
    assert json.loads(attrs["user.zarr.fill_value"]) == "NaN"
    assert json.loads(attrs["user.zarr.attributes"]) == group["temp"].attrs.asdict()
    assert "user.zarr.inner_chunks" not in attrs
    if fmt == 3:
        assert json.loads(attrs["user.zarr.dimension_names"]) == ["y", "x"]
    assert xattrs(mount.path / "temp" / "data") == attrs
    assert json.loads(xattrs(mount.path)["user.zarr.attributes"]) == {"title": "zarrfs test", "version": 3}
    assert json.loads(xattrs(mount.path / "time")["user.zarr.attributes"])["units"].startswith("hours")

    assert_enoent(mount.path / "pressure")
    assert_enoent(mount.path / "temp" / "chunks" / ("3.0" if fmt == 2 else "c/3/0"))
    assert_enoent(mount.path / ("zarr.json" if fmt == 2 else ".zgroup"))


def test_xarray_dataset_info(tmp_path: Path) -> None:
    store = tmp_path / "ds.zarr"
    _dataset().to_zarr(store, zarr_format=2, consolidated=True, encoding={"temp": {"chunks": (8, 16)}})
    lines = info_lines(store)
    assert set(lines) == {"/", "/temp", "/time", "/x"}
    assert "group" in lines["/"]
    assert "array" in lines["/temp"] and contains_run(numbers(lines["/temp"]), [20, 30])
    assert contains_run(numbers(lines["/temp"]), [8, 16])
    assert "array" in lines["/time"] and 20 in numbers(lines["/time"])
    done = zarrfs("info", str(store / "temp"))  # an array inside a group, on its own
    assert done.returncode == 0, done.stderr
    pairs = (line.partition(":") for line in done.stdout.splitlines())
    rows = {label.strip().lower(): value.strip() for label, _, value in pairs}
    assert rows["zarr format"] == "2"
    assert contains_run(numbers(rows["shape"]), [20, 30])


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
def test_consolidated_metadata_lists_the_children(fmt: int, tmp_path: Path, mount_array: Any) -> None:
    """With consolidated metadata the children are the consolidated ones, as zarr-python sees
    them: an array added later without consolidating again does not show."""
    store = tmp_path / "group.zarr"
    root = zarr.create_group(store, zarr_format=fmt, attributes={"c": 1})
    root.create_array("a", shape=(4,), dtype="<i2", chunks=(2,))[:] = [1, 2, 3, 4]
    root.create_group("g").create_array("b", shape=(3,), dtype="<u1", chunks=(3,))[:] = [5, 6, 7]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # consolidated metadata "not part of the v3 spec"
        zarr.consolidate_metadata(store)
        root.create_array("late", shape=(2,), dtype="<i2", chunks=(2,))
        seen = zarr.open_group(store, mode="r")
        assert sorted(seen.keys()) == ["a", "g"]
        assert sorted(zarr.open_group(store, mode="r", use_consolidated=False).keys()) == ["a", "g", "late"]
    mount = mount_array(store, ["ro"])
    views = {"data.nc", "data.h5"}
    group_meta = views | ({".zgroup", ".zattrs"} if fmt == 2 else {"zarr.json"})
    assert set(os.listdir(mount.path)) == group_meta | ({".zmetadata"} if fmt == 2 else set()) | {"a", "g"}
    assert set(os.listdir(mount.path / "g")) == group_meta | {"b"}
    assert_data(mount.path / "a" / "data", np.array([1, 2, 3, 4], "<i2"))
    assert_data(mount.path / "g" / "b" / "data", np.array([5, 6, 7], "<u1"))
    assert_enoent(mount.path / "late")
    assert set(info_lines(store)) == {"/", "/a", "/g", "/g/b"}


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
def test_xarray_dataset_edited_through_the_mount(fmt: int, tmp_path: Path, mount_array: Any) -> None:
    """Fill the unstored all-NaN chunk with values, blank a stored chunk to all NaN (so it is
    deleted from the store), rewrite a coordinate; xarray reads the edits back."""
    store = tmp_path / "ds.zarr"
    ds = _dataset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(store, zarr_format=fmt, consolidated=True, encoding={"temp": {"chunks": (8, 16)}})
    expected = ds["temp"].values.copy()
    mount = mount_array(store)
    key = (lambda i, j: f"{i}.{j}") if fmt == 2 else (lambda i, j: f"c/{i}/{j}")
    filled = np.arange(8 * 16, dtype="<f4").reshape(8, 16) + 0.5
    with open(mount.path / "temp" / "chunks" / key(1, 1), "r+b") as f:  # no O_TRUNC: a fixed size
        f.write(filled.tobytes())
    expected[8:16, 16:30] = filled[:, :14]
    with open(mount.path / "temp" / "data", "r+b") as f:
        for row in range(8):
            f.seek(row * 30 * 4)
            f.write(np.full(16, np.nan, "<f4").tobytes())
    expected[:8, :16] = np.nan
    with open(mount.path / "x" / "data", "r+b") as f:
        f.write(np.array([-5, -6], "<i4").tobytes())
    assert mount.unmount() == 0

    stored = store / "temp" / (key(0, 0) if fmt == 2 else "c/0/0")
    assert not stored.exists()
    assert (store / "temp" / (key(1, 1) if fmt == 2 else "c/1/1")).exists()
    reread = xr.open_zarr(store, decode_times=True)
    assert np.array_equal(reread["temp"].values, expected, equal_nan=True)
    assert reread["x"].values[:3].tolist() == [-5, -6, 20]
    assert np.array_equal(reread["time"].values, TIMES.values)
    assert reread.attrs == {"title": "zarrfs test", "version": 3}
