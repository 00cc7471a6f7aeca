"""An array's metadata in its store (zarrfs.array_metadata), above the array layer: opening an
array whatever its format, creating a v3 one, and the metadata writer a resize needs (an array
made without one refuses to resize). zarr-python and TensorStore read what it wrote; the
offline `zarrfs resize` keeps v3 consolidated metadata two groups up in step."""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorstore as ts
import zarr

from tests.helpers.mounting import ZARRFS
from zarrfs.array import ZarrArray
from zarrfs.array_metadata import create_array, open_array
from zarrfs.errors import MetadataError, ReadOnlyError
from zarrfs.formats import discover
from zarrfs.formats.v3 import metadata_from_json
from zarrfs.grid import Box
from zarrfs.store import Store

pytestmark = pytest.mark.fast

DOC: dict[str, Any] = {
    "zarr_format": 3, "node_type": "array", "shape": [6, 5], "data_type": "int16",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
    "fill_value": -3, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    "attributes": {"units": "m"},
}
VALUES = np.arange(30, dtype="<i2").reshape(6, 5) * 7


def test_open_array_where_nothing_is_names_the_document(tmp_path: Path) -> None:
    with pytest.raises(MetadataError, match=r"zarr\.json: not found in .*nor \.zarray or meta"):
        open_array(Store.open(str(tmp_path)))


def test_create_array_writes_the_v3_document_zarr_python_reads(tmp_path: Path) -> None:
    description = metadata_from_json(DOC)
    array = create_array(Store.open(str(tmp_path)), description, threads=1)
    try:
        array.write(Box((0, 0), (6, 5)), VALUES)
        array.flush()
    finally:
        array.close()
    stored = (tmp_path / "zarr.json").read_bytes()
    assert stored == json.dumps(description.to_json(), indent=2).encode() + b"\n"
    read = zarr.open_array(str(tmp_path), mode="r")
    assert np.array_equal(read[...], VALUES) and read.attrs["units"] == "m"


def test_create_array_refuses_codecs_it_cannot_build_before_writing(tmp_path: Path) -> None:
    doc = {**DOC, "codecs": [*DOC["codecs"], {"name": "no-such-codec"}]}
    with pytest.raises(MetadataError, match="unknown codec"):
        create_array(Store.open(str(tmp_path)), metadata_from_json(doc))
    assert list(tmp_path.iterdir()) == []


def test_an_array_made_without_a_metadata_writer_cannot_be_resized(tmp_path: Path) -> None:
    zarr.create_array(str(tmp_path), shape=(6, 5), chunks=(4, 4), dtype="<i2", fill_value=-3)[...] = VALUES
    store = Store.open(str(tmp_path))
    node = discover(store.get, "")
    assert node is not None
    before = (tmp_path / "zarr.json").read_bytes()
    array = ZarrArray(store, node.describe(), node.raw["zarr.json"], threads=1)
    try:
        with pytest.raises(ReadOnlyError, match="without a writer of its metadata"):
            array.resize((2, 5))
        assert array.shape == (6, 5)
    finally:
        array.close()
    assert (tmp_path / "zarr.json").read_bytes() == before
    assert np.array_equal(zarr.open_array(str(tmp_path), mode="r")[...], VALUES)


def test_resize_rewrites_the_shape_of_a_v2_array_inside_a_group(tmp_path: Path) -> None:
    """Opened by its path in the group's store: only its own `.zarray` changes, in shape."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = zarr.open_group(str(tmp_path), mode="w", zarr_format=2)
        group.create_group("sub").create_array("x", shape=(6, 5), chunks=(4, 4), dtype="<i2",
                                               fill_value=-3)[...] = VALUES
    before = json.loads((tmp_path / "sub" / "x" / ".zarray").read_text())
    array = open_array(Store.open(str(tmp_path)), "sub/x", threads=1)
    try:
        assert np.array_equal(array.read(Box((0, 0), (6, 5))), VALUES)
        array.resize((3, 5))
        array.resize((8, 5))
    finally:
        array.close()
    after = json.loads((tmp_path / "sub" / "x" / ".zarray").read_text())
    assert after == {**before, "shape": [8, 5]}
    expected = np.full((8, 5), -3, "<i2")
    expected[:3] = VALUES[:3]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.array_equal(zarr.open_array(str(tmp_path / "sub" / "x"), mode="r")[...], expected)


def test_offline_resize_updates_v3_consolidated_metadata_of_every_group_above(tmp_path: Path) -> None:
    root = tmp_path / "g.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = zarr.open_group(str(root), mode="w")
        group.create_group("sub").create_array("x", shape=(6, 5), chunks=(4, 4), dtype="<i2",
                                               fill_value=-3)[...] = VALUES
        zarr.consolidate_metadata(str(root / "sub"))
        zarr.consolidate_metadata(str(root))
    result = subprocess.run([ZARRFS, "resize", str(root / "sub" / "x"), "--shape", "2,5"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert str(root) in result.stdout and str(root / "sub") in result.stdout
    listed = json.loads((root / "zarr.json").read_text())["consolidated_metadata"]["metadata"]
    assert listed["sub/x"]["shape"] == [2, 5]
    inner = json.loads((root / "sub" / "zarr.json").read_text())["consolidated_metadata"]["metadata"]
    assert inner["x"]["shape"] == [2, 5]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opened = zarr.open_group(str(root), mode="r", use_consolidated=True)["sub/x"]
    assert isinstance(opened, zarr.Array) and opened.shape == (2, 5)
    read = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root / "sub" / "x")}})
    assert np.array_equal(read.result().read().result(), VALUES[:2])


def test_a_sharded_array_read_shrunk_and_grown_again_reads_the_fill_value(tmp_path: Path) -> None:
    # The shard indexes of what the shrink deleted were known from the first read.
    stored = zarr.create_array(str(tmp_path / "a"), shape=(10, 6), chunks=(2, 3), shards=(4, 6), dtype="i2",
                               fill_value=-7)
    values = np.arange(60, dtype="i2").reshape(10, 6) + 1
    stored[...] = values
    array = open_array(Store.open(str(tmp_path / "a")))
    try:
        assert np.array_equal(array.read(Box((0, 0), (10, 6))), values)
        array.resize((2, 6))
        array.resize((10, 6))
        values[2:] = -7
        assert np.array_equal(array.read(Box((0, 0), (10, 6))), values)
    finally:
        array.close()
    assert np.array_equal(zarr.open_array(str(tmp_path / "a"), mode="r")[...], values)
