"""Close-to-open from the first open: an array is made from the metadata read when its group
was listed, and another writer may change that metadata before the array is first opened.
The first open shows the array as stored then, as every later open does (zarr-python resizes
it between `ls` of the group and the first open of its files; a local store and S3). An
array's metadata file, opened alone, shows a resize as its other files do.

Also what it costs: the first open of an array whose group was just listed asks the store
about its metadata once (the recheck's request), not twice."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import MountFactory
from tests.helpers.s3_server import S3Server
from tests.helpers.scale_arrays import RequestLog

pytest_plugins = ["tests.helpers.recheck_places"]  # (the fixtures `where` and `s3_server`)

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)

VALUES = np.arange(40, dtype="<i4").reshape(4, 10)


def values(path: Path, shape: tuple[int, ...]) -> np.ndarray:
    """A file's elements (read with Path.read_bytes, which lets go of the interpreter lock while
    it waits: np.fromfile does not, and the moto server answering the daemon runs in this process)."""
    return np.frombuffer(path.read_bytes(), VALUES.dtype).reshape(shape)


def group_of_two(url: str, reach: dict[str, Any]) -> None:
    group = zarr.open_group(url, mode="w", **reach)
    for name in ("a", "b"):
        array = group.create_array(name, shape=VALUES.shape, chunks=(2, 5), dtype=VALUES.dtype, fill_value=0)
        array[...] = VALUES


@pytest.mark.parametrize("first", ["data", "data.npy", "data.mhd", "chunk", "zarr.json"])
def test_a_resize_between_the_listing_and_the_first_open_shows(where: tuple[str, dict[str, Any], list[str]],
                                                               mount_array: MountFactory, first: str) -> None:
    url, reach, options = where
    group_of_two(url, reach)
    mount = mount_array(url, options)
    assert {"a", "b", "zarr.json"} <= set(os.listdir(mount.path))  # (both arrays' metadata read)
    writer = zarr.open_array(f"{url}/a", mode="r+", **reach)
    writer.resize((6, 10))
    writer[4:6, :] = 7
    expected = np.concatenate([VALUES, np.full((2, 10), 7, VALUES.dtype)])

    array = mount.path / "a"
    if first == "data":
        with open(array / "data", "rb", buffering=0) as f:
            assert os.fstat(f.fileno()).st_size == expected.nbytes
            assert np.array_equal(np.frombuffer(f.read(), VALUES.dtype).reshape(6, 10), expected)
    elif first == "data.npy":
        assert np.array_equal(np.load(array / "data.npy"), expected)
    elif first == "data.mhd":
        assert "DimSize = 10 6\n" in (array / "data.mhd").read_text()
    elif first == "zarr.json":
        assert json.loads((array / "zarr.json").read_bytes())["shape"] == [6, 10]
        assert os.stat(array / "data").st_size == expected.nbytes
    else:  # (a chunk there before: the grid's new row shows once the array was opened)
        assert np.array_equal(values(array / "chunks" / "c" / "1" / "1", (2, 5)),
                              expected[2:4, 5:10])
        assert np.array_equal(values(array / "chunks" / "c" / "2" / "1", (2, 5)),
                              expected[4:6, 5:10])
    assert json.loads((array / "zarr.json").read_bytes())["shape"] == [6, 10]
    assert np.array_equal(values(array / "data", (6, 10)), expected)
    assert np.array_equal(values(mount.path / "b" / "data", VALUES.shape), VALUES)  # (untouched: as it was)


def test_an_opened_arrays_metadata_file_shows_a_resize_at_its_own_open(
        where: tuple[str, dict[str, Any], list[str]], mount_array: MountFactory) -> None:
    url, reach, options = where
    group_of_two(url, reach)
    mount = mount_array(url, options)
    array = mount.path / "a"
    assert np.array_equal(values(array / "data", VALUES.shape), VALUES)
    assert json.loads((array / "zarr.json").read_bytes())["shape"] == [4, 10]
    zarr.open_array(f"{url}/a", mode="r+", **reach).resize((4, 15))
    assert json.loads((array / "zarr.json").read_bytes())["shape"] == [4, 15]  # (nothing else opened)
    assert os.stat(array / "data").st_size == 4 * 15 * VALUES.itemsize


def test_a_first_open_after_a_listing_asks_about_the_metadata_once(s3_server: S3Server, tmp_path: Path,
                                                                   mount_array: MountFactory) -> None:
    url = f"s3://{s3_server.bucket}/g.zarr"
    group_of_two(url, {"storage_options": s3_server.s3fs_options()})
    log = RequestLog(tmp_path / "requests.log")
    mount = mount_array(url, [f"endpoint_url={s3_server.endpoint_url}"], env=log.env)
    assert {"a", "b", "zarr.json"} <= set(os.listdir(mount.path))
    log.take()
    with open(mount.path / "a" / "data", "rb") as f:
        assert f.read(4) == VALUES.tobytes()[:4]
    requests = log.take()
    asked = [r for r in requests if r.key.endswith("a/zarr.json")]
    assert [r.kind for r in asked] == ["stat"], requests.summary()
