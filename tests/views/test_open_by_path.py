"""Every file of every view opens by its path on a fresh mount, nothing listed before, and
reads as it does once its directories were listed: as a script or a viewer given a path does
(issue 38 item 3: data.ome.tif of an OME-Zarr image failed with EIO until `ls`)."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from ome_zarr.writer import write_image

from tests.helpers.mounting import MountFactory
from tests.helpers.pyramids import pyramid

HEAD = 4096  # bytes of each file compared: a header, and a view's first data


def ome_04_in_a_group(path: Path) -> None:
    root = zarr.open_group(path, mode="w", zarr_format=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_image((np.arange(2 * 64 * 80) % 251).astype(np.uint8).reshape(2, 64, 80),
                    root.create_group("image"), axes="cyx", scale_factors=[2],
                    storage_options={"chunks": (1, 32, 32)})


def ome_05_at_the_root(path: Path) -> None:
    root = zarr.open_group(path, mode="w", zarr_format=3)
    values = np.arange(48 * 40, dtype="<u2").reshape(48, 40)
    root.create_array("0", shape=values.shape, dtype="<u2", chunks=(16, 16))[...] = values
    root.create_array("1", shape=(24, 20), dtype="<u2", chunks=(16, 16))[...] = values[::2, ::2]
    transform = [{"type": "scale", "scale": [1.0, 1.0]}]
    root.attrs["ome"] = {"version": "0.5", "multiscales": [{
        "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
        "datasets": [{"path": "0", "coordinateTransformations": transform},
                     {"path": "1", "coordinateTransformations": [{"type": "scale", "scale": [2.0, 2.0]}]}]}]}


def geozarr_multiscales(path: Path) -> None:
    pyramid(path)


def nested_arrays(path: Path, zarr_format: int) -> None:
    inner = zarr.open_group(path, mode="w", zarr_format=zarr_format).create_group("a").create_group("b")
    inner.create_array("f", shape=(20, 30), dtype="<f4", chunks=(8, 8))[...] = np.arange(600).reshape(20, 30)
    inner.create_array("i", shape=(10,), dtype="<i8", chunks=(4,))[...] = np.arange(10)


LAYOUTS = {"ome-0.4-in-a-group": ome_04_in_a_group, "ome-0.5-at-the-root": ome_05_at_the_root,
           "geozarr-multiscales": geozarr_multiscales,
           "nested-v3": lambda path: nested_arrays(path, 3), "nested-v2": lambda path: nested_arrays(path, 2)}


def listed_files(root: Path) -> dict[str, bytes]:
    """Every regular file below `root` outside chunks/ (and one chunk file of each array), by
    path, with its first bytes, found by listing every directory."""
    found: dict[str, bytes] = {}
    for directory, _, files in os.walk(root):
        relative = Path(directory).relative_to(root)
        if "chunks" in relative.parts:
            continue
        for name in files:
            with open(Path(directory) / name, "rb") as f:
                found[str(relative / name)] = f.read(HEAD)
    return found


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_file_opens_by_path_on_a_fresh_mount(tmp_path: Path, mount_array: MountFactory,
                                                   layout: str) -> None:
    store = tmp_path / "store.zarr"
    LAYOUTS[layout](store)
    expected = listed_files(mount_array(store, ["ro"]).path)
    assert any(name.endswith((".tif", ".nc")) for name in expected), json.dumps(sorted(expected))
    failed: dict[str, Any] = {}
    for name, head in sorted(expected.items()):
        fresh = mount_array(store, ["ro"])
        try:
            with open(fresh.path / name, "rb") as f:
                if f.read(HEAD) != head:
                    failed[name] = "other bytes"
        except OSError as e:
            failed[name] = str(e)
        fresh.unmount()
    assert not failed, failed
