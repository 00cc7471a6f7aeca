"""The mount as a workspace over S3 (a local moto server): setfattr, mkdir, rmdir, `rm -r` and
`mv` land in the bucket as zarr-python reads it through consolidated metadata; a deleted
array leaves no key; two mounts adding groups to one group keep both (compare-and-swap)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import s3fs
import zarr

from tests.helpers.mounting import MountFactory
from tests.helpers.s3_server import S3Server, free_port, serving

VALUES = np.arange(60, dtype="<i2").reshape(10, 6)


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    yield from serving(S3Server(free_port()), monkeypatch)


def _options(server: S3Server) -> dict[str, Any]:
    return {"endpoint_url": server.endpoint_url, "key": "testing", "secret": "testing"}


def _keys(server: S3Server) -> list[str]:
    fs = s3fs.S3FileSystem(**server.s3fs_options())
    prefix = f"{server.bucket}/g.zarr/"
    return sorted(path[len(prefix):] for path in fs.find(prefix))


def _opened(server: S3Server) -> zarr.Group:
    return zarr.open_consolidated(f"s3://{server.bucket}/g.zarr", mode="r", storage_options=_options(server))


def _members(group: zarr.Group) -> set[str]:
    return {name for name, _ in group.members(max_depth=None)}


def test_workspace_changes_land_in_s3(s3_server: S3Server, mount_array: MountFactory) -> None:
    url = f"s3://{s3_server.bucket}/g.zarr"
    store = zarr.storage.FsspecStore.from_url(url, storage_options=_options(s3_server))
    group = zarr.open_group(store, mode="w")
    group.create_array("a", shape=VALUES.shape, dtype="<i2", chunks=(4, 3))[...] = VALUES
    group.create_group("s").create_array("b", shape=(16,), dtype="<f4", chunks=(4,), shards=(8,))[...] = 1
    zarr.consolidate_metadata(store)
    options = [f"endpoint_url={s3_server.endpoint_url}"]
    first, second = mount_array(url, options), mount_array(url, options)

    os.setxattr(first.path / "a", "user.zarr.attributes", b'{"units": "K"}')
    assert dict(_opened(s3_server)["a"].attrs) == {"units": "K"}

    (first.path / "made").mkdir()
    (second.path / "also").mkdir()
    assert {"made", "also"} <= _members(_opened(s3_server))
    (first.path / "made").rmdir()

    os.rename(first.path / "a", first.path / "s" / "moved")  # copy, then delete
    moved = _opened(s3_server)["s/moved"]
    assert isinstance(moved, zarr.Array) and np.array_equal(moved[...], VALUES)
    assert not any(key.startswith("a/") for key in _keys(s3_server))

    subprocess.run(["rm", "-r", str(first.path / "s")], check=True)
    assert _keys(s3_server) == ["also/zarr.json", "zarr.json"]
    assert _members(_opened(s3_server)) == {"also"}
