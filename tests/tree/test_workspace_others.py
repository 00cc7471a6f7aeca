"""Other writers' nodes seen through a running mount (`recheck=open`, the default): zarr-python
adds and deletes arrays beside the mount; a listing of the group (or a lookup of the new
name) shows the new one and loses the deleted one (ENOENT), in groups that are listed and in
groups known from consolidated metadata (which the writer updates), locally and over S3.
`recheck=never` keeps what the mount first saw, the contrast that shows the others work."""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import MountFactory
from tests.helpers.s3_server import S3Server, free_port, serving

RECHECK_INTERVAL = 1.0  # zarrfs.tree.group_recheck: the most a group is asked about again


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    yield from serving(S3Server(free_port()), monkeypatch)


def _writer(store: Any, consolidated: bool) -> zarr.Group:
    group = zarr.open_group(store, mode="w")
    group.create_array("kept", shape=(4,), dtype="<i2", chunks=(2,))[...] = 1
    group.create_array("doomed", shape=(4,), dtype="<i2", chunks=(2,))[...] = 2
    if consolidated:
        zarr.consolidate_metadata(store)
    return group


def _change(group: zarr.Group, store: Any, consolidated: bool) -> None:
    group.create_array("new", shape=(3, 5), dtype="<f4", chunks=(3, 5))[...] = 9.5
    del group["doomed"]
    if consolidated:
        zarr.consolidate_metadata(store)


def _wait_out_the_interval(since: float) -> None:
    # Not synchronization: the mount answers a group again only this long after it last did.
    left = since + RECHECK_INTERVAL - time.monotonic()
    if left > 0:
        time.sleep(left)


def _shows_the_change(root: Path) -> None:
    assert sorted(os.listdir(root)) == ["data.h5", "data.nc", "kept", "new", "zarr.json"]
    assert (root / "new" / "data").stat().st_size == 15 * 4
    # (read_bytes, not np.fromfile: np.fromfile holds the GIL in read(2), and the S3 test's
    # moto server is a thread of this process, which then cannot answer the mount's GET)
    new = np.frombuffer((root / "new" / "data").read_bytes(), "<f4")
    assert np.array_equal(new, np.full(15, 9.5, "<f4"))
    with pytest.raises(OSError) as caught:
        os.stat(root / "doomed" / "data")
    assert caught.value.errno == errno.ENOENT


@pytest.mark.parametrize("consolidated", [False, True], ids=["listed", "consolidated"])
def test_another_writers_arrays_appear_and_vanish(tmp_path: Path, mount_array: MountFactory,
                                                  consolidated: bool) -> None:
    store = tmp_path / "g.zarr"
    group = _writer(store, consolidated)
    mount, never = mount_array(store), mount_array(store, ["recheck=never"])
    for seen in (mount, never):
        assert sorted(os.listdir(seen.path)) == ["data.h5", "data.nc", "doomed", "kept", "zarr.json"]
        assert (seen.path / "doomed" / "data").stat().st_size == 8
    listed = time.monotonic()
    _change(group, store, consolidated)
    _wait_out_the_interval(listed)

    _shows_the_change(mount.path)
    assert sorted(os.listdir(never.path)) == ["data.h5", "data.nc", "doomed", "kept", "zarr.json"]
    with pytest.raises(OSError):
        os.stat(never.path / "new")


def test_a_lookup_of_a_new_name_finds_it_without_a_listing(tmp_path: Path, mount_array: MountFactory) -> None:
    store = tmp_path / "g.zarr"
    group = _writer(store, consolidated=False)
    mount = mount_array(store)
    assert not (mount.path / "new").exists()
    asked = time.monotonic()
    group.create_array("new", shape=(2,), dtype="<u1", chunks=(2,))[...] = 3
    _wait_out_the_interval(asked)
    assert (mount.path / "new" / "data").read_bytes() == b"\x03\x03"


def test_another_writers_arrays_over_s3(s3_server: S3Server, mount_array: MountFactory) -> None:
    url = f"s3://{s3_server.bucket}/g.zarr"
    options = {"endpoint_url": s3_server.endpoint_url, "key": "testing", "secret": "testing"}
    store = zarr.storage.FsspecStore.from_url(url, storage_options=options)
    group = _writer(store, consolidated=True)
    mount = mount_array(url, [f"endpoint_url={s3_server.endpoint_url}"])
    assert sorted(os.listdir(mount.path)) == ["data.h5", "data.nc", "doomed", "kept", "zarr.json"]
    listed = time.monotonic()
    _change(group, store, consolidated=True)
    _wait_out_the_interval(listed)
    _shows_the_change(mount.path)
