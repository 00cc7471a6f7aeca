"""A store's own system errors reach the writer as what they are: a full disk is ENOSPC at
fsync (not EIO), and the data stays dirty until there is room."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import MountFactory
from zarrfs.errors import StoreError
from zarrfs.fuse.boundary import errno_for

pytestmark = pytest.mark.fast

SHAPE = (512, 1024)  # float32: 2 MiB, in 8 chunks of 256 KiB, stored uncompressed


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs, unmounted at the end."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_full_disk_is_enospc_at_fsync_and_the_data_waits_for_room(
        small_disk: Path, mount_array: MountFactory) -> None:
    store = small_disk / "array"
    zarr.create_array(store=str(store), shape=SHAPE, chunks=(64, 1024), dtype="<f4", fill_value=0,
                      compressors=None)
    filler = small_disk / "filler"
    filler.write_bytes(b"\1" * (3 << 20))  # leaves less than the array's 2 MiB
    values = np.random.default_rng(5).random(SHAPE, dtype=np.float32)
    mount = mount_array(store, ["rw"])
    fd = os.open(mount.data, os.O_WRONLY)
    try:
        assert os.pwrite(fd, values.tobytes(), 0) == values.nbytes
        with pytest.raises(OSError) as failed:
            os.fsync(fd)
        assert failed.value.errno == errno.ENOSPC
        filler.unlink()
        os.fsync(fd)
    finally:
        os.close(fd)
    assert np.array_equal(zarr.open_array(str(store), mode="r")[...], values)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EACCES])
def test_system_errors_of_the_store_keep_their_errno(code: int) -> None:
    assert errno_for(StoreError("c/0/0", os.strerror(code), code)) == code


def test_other_store_errors_are_eio() -> None:
    assert errno_for(StoreError("c/0/0", "no answer within 30 s")) == errno.EIO
    assert errno_for(StoreError("c/0/0", "connection reset", errno.ECONNRESET)) == errno.EIO
