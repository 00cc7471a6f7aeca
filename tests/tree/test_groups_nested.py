"""Nested hierarchies on a real mount, with the libraries that wrote them as the oracles: an
OME-Zarr multiscale image written by `ome-zarr`, nested zarr-python groups holding sharded
arrays (read, written through, `zarrfs info`), children named with spaces and non-ASCII
(what the writers put in the store: tests/helpers/group_checks.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader
from ome_zarr.writer import write_image

from tests.helpers.group_checks import (
    assert_data,
    assert_enoent,
    assert_metadata_files_as_stored,
    contains_run,
    img_reference,
    info_lines,
    nested,
    numbers,
    tree,
    xattrs,
)
from tests.helpers.mounting import VIEW_FILES, without_views

# -- OME-Zarr -------------------------------------------------------------------------------------


def test_ome_zarr_multiscale_image(tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "image.ome.zarr"
    image = (np.arange(2 * 64 * 80, dtype=np.uint32) * 2654435761 % 251).astype(np.uint8).reshape(2, 64, 80)
    root = zarr.open_group(store, mode="w", zarr_format=2)
    write_image(image, root, axes="cyx", storage_options={"chunks": (1, 32, 32)})

    multiscales = json.loads((store / ".zattrs").read_bytes())["multiscales"]
    levels = [d["path"] for d in multiscales[0]["datasets"]]
    assert len(levels) == 5
    reader_node = next(iter(Reader(parse_url(str(store)))()))
    pyramid = [np.asarray(level) for level in reader_node.data]
    assert len(pyramid) == len(levels)
    assert np.array_equal(pyramid[0], image)
    for level in levels:
        zarray = json.loads((store / level / ".zarray").read_bytes())
        assert zarray["dimension_separator"] == "/" and zarray["zarr_format"] == 2

    mount = mount_array(store, ["ro"])
    # (data.tif: the levels as a cloud-optimized GeoTIFF)
    views = {"data.nc", "data.h5", "data.ome.tif", "data.tif"}
    assert set(os.listdir(mount.path)) == {".zgroup", ".zattrs", *views, *levels}
    assert assert_metadata_files_as_stored(mount.path, store) == 2 + 2 * len(levels)
    for index, level in enumerate(levels):
        assert without_views(os.listdir(mount.path / level)) == [".zarray", ".zattrs", "chunks", "data"]
        expected = zarr.open_array(store / level, mode="r")[...]
        assert np.array_equal(expected, pyramid[index])
        assert expected.shape == (2, 64 >> index, 80 >> index)
        assert_data(mount.path / level / "data", expected)

    # Chunk files are nested directories, one level per dimension.
    s0 = mount.path / levels[0] / "chunks"
    assert {p for p in tree(s0) if not p.endswith("/")} == {
        f"{c}/{i}/{j}" for c in range(2) for i in range(2) for j in range(3)}
    assert sorted(os.listdir(s0)) == ["0", "1"] and sorted(os.listdir(s0 / "1")) == ["0", "1"]
    padded = np.zeros((2, 64, 96), np.uint8)
    padded[:, :, :80] = image
    for c, i, j in [(0, 0, 0), (1, 1, 1), (1, 0, 2)]:
        chunk = np.fromfile(s0 / str(c) / str(i) / str(j), dtype=np.uint8).reshape(1, 32, 32)
        assert np.array_equal(chunk[0], padded[c, i * 32 : (i + 1) * 32, j * 32 : (j + 1) * 32])
    s1 = mount.path / levels[1] / "chunks"
    assert {p for p in tree(s1) if not p.endswith("/")} == {f"{c}/0/{j}" for c in range(2) for j in range(2)}
    edge = np.fromfile(s1 / "1" / "0" / "1", dtype=np.uint8).reshape(32, 32)
    assert np.array_equal(edge[:, :8], pyramid[1][1, :, 32:40]) and not edge[:, 8:].any()
    assert_enoent(s0 / "0" / "0" / "3")
    assert_enoent(s0 / "0.0.0")
    assert_enoent(mount.path / "s9")
    assert json.loads(xattrs(mount.path)["user.zarr.attributes"])["multiscales"] == multiscales
    assert xattrs(mount.path / levels[2])["user.zarr.shape"] == "2,16,20"


NESTED_TREE = {
    "zarr.json", "top/", "top/zarr.json", "top/data", "top/chunks/", "top/chunks/c/",
    *(f"top/chunks/c/{i}" for i in range(3)),
    "a/", "a/zarr.json", "a/vec/", "a/vec/zarr.json", "a/vec/data", "a/vec/chunks/", "a/vec/chunks/c/",
    *(f"a/vec/chunks/c/{i}" for i in range(3)),
    "a/b/", "a/b/zarr.json", "a/b/c/", "a/b/c/zarr.json",
    "a/b/img/", "a/b/img/zarr.json", "a/b/img/data", "a/b/img/chunks/", "a/b/img/chunks/c/",
    "a/b/img/chunks/c/0/", "a/b/img/chunks/c/1/",
    *(f"a/b/img/chunks/c/{i}/{j}" for i in range(2) for j in range(2)),
}


@pytest.mark.fast
def test_nested_groups_with_sharded_arrays(tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "tree.zarr"
    nested(store)
    assert not (store / "a" / "b" / "img" / "c" / "1" / "1").exists()
    mount = mount_array(store, ["ro"])
    assert {p for p in tree(mount.path) if Path(p).name not in VIEW_FILES} == NESTED_TREE
    assert assert_metadata_files_as_stored(mount.path, store) == 7

    root = zarr.open_group(store, mode="r")
    for name in ("top", "a/vec", "a/b/img"):
        assert_data(mount.path / name / "data", root[name][...])
    assert np.array_equal(root["a/b/img"][...], img_reference())
    # Shard files: whole shards, in little-endian whatever the stored byte order.
    shard = np.fromfile(mount.path / "a/vec/chunks/c/2", dtype="<i2")
    assert shard.tolist() == [i * -3 for i in range(40, 50)] + [-1] * 10
    shard = np.fromfile(mount.path / "a/b/img/chunks/c/1/1", dtype="<u2").reshape(20, 30)
    assert (shard == 7).all()
    shard = np.fromfile(mount.path / "a/b/img/chunks/c/0/1", dtype="<u2").reshape(20, 30)
    assert np.array_equal(shard, img_reference()[:20, 30:])

    for name in ("nosuch", "a/nosuch", "a/data", "a/chunks", "a/b/c/data", "a/b/img/nosuch",
                 "a/b/img/chunks/c/2/0", "a/b/img/chunks/c/0/2", "a/vec/chunks/c/3", ".zgroup",
                 "a/.zattrs", "a/b/img/.zarray"):
        assert_enoent(mount.path / name)


@pytest.mark.fast
def test_write_through_a_nested_group_mount(tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "tree.zarr"
    nested(store)
    metadata = {p: (store / p).read_bytes() for p in tree(store) if Path(p).name == "zarr.json"}
    assert len(metadata) == 7
    expected_img = img_reference()
    expected_vec = np.arange(50, dtype="<i2") * -3
    mount = mount_array(store)
    with open(mount.path / "a/b/img/data", "r+b") as f:
        row = np.array([1000, 1001, 1002, 1003], dtype="<u2")
        f.seek((5 * 60 + 10) * 2)
        f.write(row.tobytes())
        expected_img[5, 10:14] = row
        f.seek((25 * 60 + 40) * 2)  # inside the unstored shard (1, 1)
        f.write(np.array([999], dtype="<u2").tobytes())
        expected_img[25, 40] = 999
    new_shard = np.arange(20, dtype="<i2") + 500
    with open(mount.path / "a/vec/chunks/c/1", "r+b") as f:
        f.write(new_shard.tobytes())
    expected_vec[20:40] = new_shard
    assert mount.unmount() == 0

    root = zarr.open_group(store, mode="r")
    assert np.array_equal(root["a/b/img"][...], expected_img)
    assert np.array_equal(root["a/vec"][...], expected_vec)
    assert {p: (store / p).read_bytes() for p in metadata} == metadata
    assert json.loads(metadata["a/vec/zarr.json"])["codecs"][0]["configuration"]["codecs"][0] == {
        "name": "bytes", "configuration": {"endian": "big"}}
    assert (store / "a/b/img/c/1/1").exists()
    assert np.array_equal(root["top"][...], np.arange(7) - 3)
    assert root.attrs.asdict() == {"project": "zarrfs", "n": [1, 2]}


def test_info_on_a_nested_group(tmp_path: Path) -> None:
    store = tmp_path / "tree.zarr"
    nested(store)
    lines = info_lines(store)
    assert set(lines) == {"/", "/top", "/a", "/a/vec", "/a/b", "/a/b/img", "/a/b/c"}
    for group in ("/", "/a", "/a/b", "/a/b/c"):
        assert "group" in lines[group] and "array" not in lines[group]
    for array in ("/top", "/a/vec", "/a/b/img"):
        assert "array" in lines[array]
    assert contains_run(numbers(lines["/a/b/img"]), [40, 60])
    assert contains_run(numbers(lines["/a/b/img"]), [20, 30])  # the shard shape
    assert 50 in numbers(lines["/a/vec"]) and 7 in numbers(lines["/top"])
    assert "3" in lines["/a/b/img"]  # the zarr format


def test_children_named_with_spaces_and_non_ascii(tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "names.zarr"
    root = zarr.create_group(store, zarr_format=3)
    root.create_array("déjà vu", shape=(3,), dtype="<i1", chunks=(3,))[:] = [1, 2, 3]
    root.create_group("sub group").create_array("x-y.z", shape=(2,), dtype="<i1", chunks=(2,))[:] = [4, 5]
    mount = mount_array(store, ["ro"])
    assert set(os.listdir(mount.path)) == {"zarr.json", "data.nc", "data.h5", "déjà vu", "sub group"}
    assert set(os.listdir(mount.path / "sub group")) == {"zarr.json", "data.nc", "data.h5", "x-y.z"}
    assert_data(mount.path / "déjà vu" / "data", np.array([1, 2, 3], "<i1"))
    assert_data(mount.path / "sub group" / "x-y.z" / "data", np.array([4, 5], "<i1"))
    assert_enoent(mount.path / "deja vu")
