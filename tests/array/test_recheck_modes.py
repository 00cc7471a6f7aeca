"""`-o recheck=SECONDS|never`: with SECONDS an fd opened before another writer's change sees it
within about that time; with `never` the change is not seen (caches are trusted until
unmount), which is the contrast that shows the others work; bad values fail the mount."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.mounting import ZARRFS, is_mounted
from tests.helpers.recheck_mounts import CHUNK, DTYPE, ITEM, VALUES, Backend, block, chunk, data, grown, stats

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)


DEADLINE = 6.0  # for recheck=2: what an open fd must see by then (2 s, generously)


def eventually(check: Callable[[], bool], deadline: float = DEADLINE) -> float | None:
    """Seconds until `check` held (polled every 0.1 s), or None if not within `deadline`."""
    began = time.monotonic()
    while True:
        if check():
            return time.monotonic() - began
        if time.monotonic() - began > deadline:
            return None
        time.sleep(0.1)


# -- 3. recheck=SECONDS: open files follow ---------------------------------------------------


def test_recheck_seconds_lets_open_files_follow(backend: Backend, mount_array: Any) -> None:
    backend.create("p")
    mount = mount_array(backend.url("p"), [*backend.mount_options, "recheck=2"])
    data_fd = os.open(mount.data, os.O_RDONLY)
    chunk_fd = os.open(mount.chunk("c/1/2"), os.O_RDONLY)
    try:
        assert os.pread(data_fd, VALUES.nbytes, 0) == VALUES.tobytes()
        assert os.pread(chunk_fd, CHUNK * CHUNK * ITEM, 0) == block(VALUES, 1, 2).tobytes()
        writer = backend.writer("p")
        expected = VALUES.copy()
        writer[8:16, 16:24] = expected[8:16, 16:24] = 7
        waited = eventually(lambda: (
            os.pread(data_fd, VALUES.nbytes, 0) == expected.tobytes()
            and os.pread(chunk_fd, CHUNK * CHUNK * ITEM, 0) == block(expected, 1, 2).tobytes()))
        assert waited is not None, "an fd opened before the change did not see it"

        writer.resize((40, 32))
        writer[32:40, :] = 21
        grown_values = np.concatenate([expected, np.full((8, 32), 21, DTYPE)])
        waited = eventually(lambda: (
            os.fstat(data_fd).st_size == grown_values.nbytes
            and os.pread(data_fd, grown_values.nbytes, 0) == grown_values.tobytes()))
        assert waited is not None, "an fd opened before the resize did not follow it"
    finally:
        os.close(data_fd)
        os.close(chunk_fd)


# -- 4. recheck=never: the contrast ----------------------------------------------------------


def test_recheck_never_trusts_the_caches(backend: Backend, mount_array: Any) -> None:
    backend.create("n")
    mount = mount_array(backend.url("n"), [*backend.mount_options, "recheck=never"])
    assert np.array_equal(data(mount), VALUES)
    assert np.array_equal(chunk(mount, 1, 2), block(VALUES, 1, 2))
    before = stats(mount)
    writer = backend.writer("n")
    writer[8:16, 16:24] = 7
    writer.resize((40, 32))
    assert np.array_equal(data(mount), VALUES)
    assert np.array_equal(chunk(mount, 1, 2), block(VALUES, 1, 2))
    assert os.stat(mount.data).st_size == VALUES.nbytes
    after = grown(before, stats(mount))
    assert after["rechecks"] == 0 and after["chunks_decoded"] == 0


# -- 7. bad values ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["recheck=0", "recheck=-1", "recheck=soon", "recheck=nan",
                                   "recheck=", "recheck"])
def test_bad_recheck_values_fail_the_mount(value: str, local: Backend, tmp_path: Path) -> None:
    local.create("b")
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    process = subprocess.Popen([ZARRFS, "mount", "-f", local.url("b"), str(mountpoint), "-o", value],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, error = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:  # it mounted: undo that, then fail
        subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], capture_output=True)
        process.communicate(timeout=30)
        pytest.fail(f"-o {value} mounted")
    assert process.returncode != 0
    assert "recheck" in error, error
    assert not is_mounted(mountpoint)
