"""The node tree without FUSE: names, inode numbers, metadata-only arrays, extended attributes."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import zarr

from zarrfs.array import Shared
from zarrfs.formats import discover
from zarrfs.store import Store
from zarrfs.tree import ARRAY, CHUNK, DATA, GROUP, ROOT_INODE, Ref, Tree
from zarrfs.views.array_dir import ViewSettings
from zarrfs.views.placement.ome import ome_placement

pytestmark = pytest.mark.fast


def ome_spacings(group_attributes: dict[str, object], name: str, rank: int) -> list[float] | None:
    """The spacing `ome_placement` finds, one number per axis (None: nothing usable)."""
    found = ome_placement(group_attributes, name, rank)
    return None if found is None or found.spacing is None else list(found.spacing)


def open_tree(path: Path) -> Tree:
    store = Store.open(str(path))
    root = discover(store.get, "")
    assert root is not None
    return Tree(store, root, Shared(1 << 20, 1), ViewSettings())


def array_doc(shape: list[int]) -> dict[str, object]:
    return {"zarr_format": 3, "node_type": "array", "shape": shape, "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 2]}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
            "codecs": [{"name": "bytes"}]}


def test_inodes_depend_on_path_and_role_only(tmp_path: Path) -> None:
    """A chunk file keeps its inode number when the array's shape (so its grid) changes."""
    numbers = []
    for shape in ([4, 4], [40, 6]):
        root = tmp_path / f"shape{shape[0]}"
        root.mkdir()
        (root / "zarr.json").write_text(json.dumps(array_doc(shape)))
        tree = open_tree(root)
        chunk: Ref | None = tree.root
        for name in ("chunks", "c", "1", "1"):
            assert chunk is not None
            chunk = tree.lookup(chunk, name)
        assert chunk == Ref("", CHUNK, ("c", "1", "1"))
        numbers.append((tree.inode(chunk), tree.inode(Ref("", DATA))))
        tree.close()
    assert numbers[0] == numbers[1]
    assert len({*numbers[0], ROOT_INODE}) == 3


def test_remembered_inodes_are_forgotten_with_the_kernel(tmp_path: Path) -> None:
    (tmp_path / "zarr.json").write_text(json.dumps(array_doc([4, 4])))
    tree = open_tree(tmp_path)
    data = tree.lookup(tree.root, "data")
    assert data is not None
    number = tree.inodes.remember(data)
    assert tree.inodes.remember(data) == number
    tree.inodes.forget(number, 1)
    assert tree.inodes.ref(number) == data
    tree.inodes.forget(number, 1)
    assert tree.inodes.ref(number) is None
    tree.inodes.forget(ROOT_INODE, 5)
    assert tree.inodes.ref(ROOT_INODE) == tree.root
    tree.close()


def test_a_group_lists_metadata_and_children_and_hides_bad_arrays_contents(tmp_path: Path) -> None:
    group = zarr.open_group(str(tmp_path), mode="w", zarr_format=3, attributes={"title": "t"})
    group.create_array("good", shape=(3, 3), chunks=(2, 2), dtype="<i2")[...] = np.arange(9).reshape(3, 3)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "zarr.json").write_text(json.dumps({**array_doc([4, 4]), "codecs": [{"name": "lz5"}]}))
    tree = open_tree(tmp_path)
    assert tree.root.role == GROUP
    assert list(tree.names(tree.root)) == ["zarr.json", "data.nc", "data.h5", "bad", "good"]
    good, broken = tree.lookup(tree.root, "good"), tree.lookup(tree.root, "bad")
    assert good == Ref("good", ARRAY) and broken == Ref("bad", ARRAY)
    assert list(tree.names(good)) == ["zarr.json", "data", "data.npy", "data.raw.nhdr", "data.mhd",
                                      "data.vrt", "data.nii", "data.mrc", "data.fits", "data.tif",
                                      "data.h5", "chunks"]
    assert list(tree.names(broken)) == ["zarr.json"]
    assert tree.lookup(broken, "data") is None
    assert "lz5" in (tree.open_array("bad").problem or "")
    assert tree.xattrs(tree.root) == {"user.zarr.attributes": b'{"title": "t"}',
                                      "user.zarr.views": b'["data.nc", "data.h5"]'}
    xattrs = tree.xattrs(good)
    assert xattrs["user.zarr.shape"] == b"3,3" and xattrs["user.zarr.dtype"] == b"<i2"
    data = tree.lookup(good, "data")
    assert data is not None
    view = tree.file(data)
    assert bytes(view.read(0, view.size)) == np.arange(9, dtype="<i2").tobytes()
    tree.close()


def test_opening_many_arrays_costs_no_chunk_sized_memory(tmp_path: Path) -> None:
    """Listing every array of a big group opens them all: none may hold a chunk-sized buffer
    (400 arrays of 8 MiB chunks would be 3.2 GiB)."""
    group = {"zarr_format": 3, "node_type": "group"}
    (tmp_path / "zarr.json").write_text(json.dumps(group))
    doc = {**array_doc([4096, 512]), "data_type": "float32", "fill_value": "NaN",
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4096, 512]}},
           "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}
    for i in range(400):
        (tmp_path / f"a{i}").mkdir()
        (tmp_path / f"a{i}" / "zarr.json").write_text(json.dumps(doc))
    tree = open_tree(tmp_path)
    tracemalloc.start()
    try:
        for name in tree.names(tree.root)[3:]:  # (after zarr.json, data.nc and data.h5)
            array = tree.lookup(tree.root, name)
            assert array is not None and "data" in tree.names(array)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"{peak / 2**20:.0f} MiB to open 400 arrays"
    data = tree.lookup(Ref("a7", ARRAY), "data")
    assert data is not None
    assert np.isnan(np.frombuffer(bytes(tree.file(data).read(0, 16)), "<f4")).all()
    tree.close()


def test_ome_spacings_are_taken_only_when_they_fit() -> None:
    datasets = [{"path": "s0", "coordinateTransformations": [{"type": "scale", "scale": [1, 0.5, 0.25]}]},
                {"path": "s1", "coordinateTransformations": [{"type": "scale", "scale": [2, 0, 1]}]}]
    v04 = {"multiscales": [{"datasets": datasets}]}
    assert ome_spacings(v04, "s0", 3) == [1.0, 0.5, 0.25]
    assert ome_spacings({"ome": v04}, "s0", 3) == [1.0, 0.5, 0.25]  # OME-Zarr 0.5
    assert ome_spacings(v04, "s0", 2) is None  # not one per axis
    assert ome_spacings(v04, "s1", 3) is None  # zero
    assert ome_spacings(v04, "s9", 3) is None
    for odd in ({"ome": "x"}, {"multiscales": "x"}, {"multiscales": [{"datasets": [1]}]}, {}):
        assert ome_spacings(odd, "s0", 3) is None
