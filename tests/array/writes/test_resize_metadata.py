"""Resizing an array through `data` on a real rw mount (TensorStore's resize semantics), with
zarr-python and TensorStore reading the store as the oracles: the metadata that follows a resize, of a Zarr
v1 array, of the consolidated metadata of the groups above, and of an array in a plain
group."""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
import zarr

from tests.helpers.resize_arrays import FILL, ROW, SHAPE, assert_store_holds, initial_values


def _member(group: zarr.Group, key: str) -> zarr.Array[Any]:
    array = group[key]
    assert isinstance(array, zarr.Array)
    return array


# -- Zarr v1 ------------------------------------------------------------------------------------


def _read_v1(path: Path) -> np.ndarray:
    """Decode a v1 array (zlib, C order) per the specification, from its files alone."""
    meta = json.loads((path / "meta").read_text())
    shape, chunks = tuple(meta["shape"]), tuple(meta["chunks"])
    out = np.full(shape, meta["fill_value"], dtype=meta["dtype"])
    for index in np.ndindex(*(-(-n // c) for n, c in zip(shape, chunks, strict=True))):
        key = path / ".".join(map(str, index))
        if key.exists():
            block = np.frombuffer(zlib.decompress(key.read_bytes()), dtype=meta["dtype"]).reshape(chunks)
            where = tuple(slice(i * c, min((i + 1) * c, n))
                          for i, c, n in zip(index, chunks, shape, strict=True))
            out[where] = block[tuple(slice(0, w.stop - w.start) for w in where)]
    return out


def test_v1_array(tmp_path: Path, mount_array: Any) -> None:
    path = tmp_path / "v1"
    path.mkdir()
    want = initial_values()
    meta = {"zarr_format": 1, "shape": list(SHAPE), "chunks": [4, 3], "dtype": "<i2", "compression": "zlib",
            "compression_opts": 1, "fill_value": FILL, "order": "C"}
    (path / "meta").write_text(json.dumps(meta, indent=4, sort_keys=True))
    for i, j in np.ndindex(3, 2):
        block = np.full((4, 3), FILL, dtype="<i2")
        part = want[i * 4 : i * 4 + 4, j * 3 : j * 3 + 3]
        block[: part.shape[0], : part.shape[1]] = part
        (path / f"{i}.{j}").write_bytes(zlib.compress(block.tobytes(), 1))
    assert np.array_equal(_read_v1(path), want)
    mount = mount_array(path, ["rw"])
    os.truncate(mount.data, 3 * ROW)
    assert json.loads((mount.path / "meta").read_bytes())["shape"] == [3, 6]
    assert sorted(os.listdir(mount.path / "chunks")) == ["0.0", "0.1"]
    with open(mount.data, "ab") as f:
        f.write(np.arange(8, dtype="<i2").tobytes())
    assert mount.unmount() == 0
    stored = json.loads((path / "meta").read_text())
    assert stored == {**meta, "shape": [5, 6]}
    grown = np.full((5, 6), FILL, dtype=np.int16)
    grown[:3] = want[:3]
    grown.reshape(-1)[18:26] = np.arange(8)
    assert np.array_equal(_read_v1(path), grown)
    assert sorted(p.name for p in path.iterdir()) == ["0.0", "0.1", "1.0", "meta"]  # 1.1: all fill


# -- consolidated metadata ----------------------------------------------------------------------


@pytest.mark.parametrize("fmt", [2, 3])
def test_consolidated_metadata_follows(tmp_path: Path, mount_array: Any, fmt: Literal[2, 3]) -> None:
    """An array in a subgroup of a group with consolidated metadata (v2 `.zmetadata`, v3
    inline): zarr-python reads the shape from there, so it must follow."""
    path = tmp_path / "group.zarr"
    root = zarr.open_group(path, mode="w", zarr_format=fmt)
    sub = root.create_group("sub")
    kept = root.create_array("kept", shape=(4, 4), dtype="<i2", chunks=(2, 2), fill_value=0)
    kept[...] = 5
    nested = sub.create_array("nested", shape=SHAPE, dtype="<i2", chunks=(4, 3), fill_value=FILL)
    nested[...] = initial_values()
    zarr.consolidate_metadata(path, zarr_format=fmt)
    consolidated = ".zmetadata" if fmt == 2 else "zarr.json"
    metadata_name = ".zarray" if fmt == 2 else "zarr.json"

    mount = mount_array(path, ["rw"])
    before = (mount.path / consolidated).read_bytes()
    with open(mount.path / "sub" / "nested" / "data", "ab") as f:
        f.write(b"\0" * ROW * 2)
    group = zarr.open_group(path, mode="r", use_consolidated=True)
    assert _member(group, "sub/nested").shape == (12, 6)
    assert (mount.path / consolidated).read_bytes() != before
    shown = json.loads((mount.path / consolidated).read_bytes())
    if fmt == 2:
        assert shown["metadata"]["sub/nested/.zarray"]["shape"] == [12, 6]
        assert shown["metadata"]["kept/.zarray"]["shape"] == [4, 4]
    else:
        assert shown["consolidated_metadata"]["metadata"]["sub/nested"]["shape"] == [12, 6]
    assert (mount.path / consolidated).read_bytes() == (path / consolidated).read_bytes()
    assert json.loads((mount.path / "sub" / "nested" / metadata_name).read_bytes())["shape"] == [12, 6]
    assert mount.unmount() == 0
    group = zarr.open_group(path, mode="r", use_consolidated=True)
    want = np.full((12, 6), FILL, dtype=np.int16)
    want[:10] = initial_values()
    want[10:] = 0
    assert np.array_equal(np.asarray(_member(group, "sub/nested")[...]), want)
    assert np.array_equal(np.asarray(_member(group, "kept")[...]), np.full((4, 4), 5))


def test_array_in_a_plain_group(tmp_path: Path, mount_array: Any) -> None:
    """Without consolidated metadata: the array's own metadata is all there is to change."""
    path = tmp_path / "group.zarr"
    root = zarr.open_group(path, mode="w", zarr_format=3)
    root.create_group("sub").create_array("nested", shape=SHAPE, dtype="<i2", chunks=(4, 3),
                                          fill_value=FILL)[...] = initial_values()
    mount = mount_array(path, ["rw"])
    os.truncate(mount.path / "sub" / "nested" / "data", 2 * ROW)
    assert _member(zarr.open_group(path, mode="r"), "sub/nested").shape == (2, 6)
    assert sorted(os.listdir(mount.path / "sub" / "nested" / "chunks" / "c")) == ["0"]
    assert mount.unmount() == 0
    assert_store_holds(path / "sub" / "nested", "v3", initial_values()[:2])
