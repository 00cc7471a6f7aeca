"""`df` of a mount: a local store shows the room its own filesystem has (read-only mounts:
none available to write); a remote store shows a large free space, as s3fs-fuse and gcsfuse do."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import zarr

from tests.helpers.mounting import MountFactory

pytestmark = pytest.mark.fast


def make_array(path: Path) -> Path:
    zarr.create_array(store=str(path), shape=(64, 64), chunks=(32, 32), dtype="<u2", fill_value=0)
    return path


def test_a_local_mount_shows_its_stores_room(tmp_path: Path, mount_array: MountFactory) -> None:
    store = make_array(tmp_path / "a.zarr")
    mount = mount_array(store, ["rw"])
    shown, underlying = os.statvfs(mount.path), os.statvfs(store)
    assert shown.f_blocks * shown.f_frsize == underlying.f_blocks * underlying.f_frsize
    # Free space moves as other files are written: compare within 64 MiB.
    assert abs(shown.f_bavail * shown.f_frsize - underlying.f_bavail * underlying.f_frsize) < 64 << 20
    assert shown.f_bavail > 0 and shown.f_files == underlying.f_files


def test_a_read_only_mount_has_no_room_to_write(tmp_path: Path, mount_array: MountFactory) -> None:
    mount = mount_array(make_array(tmp_path / "a.zarr"), ["ro"])
    shown = os.statvfs(mount.path)
    assert shown.f_blocks > 0 and shown.f_bavail == 0
