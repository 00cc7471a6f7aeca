"""Crash consistency: mounting again right on a killed daemon's mountpoint, `zarrfs mount`
must either clear it or fail saying how to (the storm that kills it: test_crash_storm.py)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.crash_arrays import LAYOUTS, assert_dead_mount, create
from tests.helpers.crash_workers import SHAPE
from tests.helpers.mounting import ZARRFS, is_mounted, mounted, without_views

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)


def test_mounting_on_a_killed_daemons_mountpoint_clears_it_or_says_how(tmp_path: Path) -> None:
    """Right after the kill, as a user would: the kernel still caches the root's attributes."""
    root = tmp_path / "array.zarr"
    create(root, LAYOUTS[0], 0, random.Random(0))
    mountpoint = tmp_path / "mnt"
    with mounted(root, mountpoint) as mount:
        assert mount.data.stat().st_size == SHAPE[0] * SHAPE[1] * 8
        mount.process.kill()
        mount.process.wait(timeout=10)
        assert_dead_mount(mountpoint)
        again = subprocess.run([ZARRFS, "mount", str(root), str(mountpoint)],
                               capture_output=True, text=True, timeout=60)
        try:
            if again.returncode == 0:
                assert "cleared the stale mount" in again.stderr, again.stderr
                assert without_views(os.listdir(mountpoint)) == ["chunks", "data", "zarr.json"]
            else:
                message = again.stderr.strip()
                assert len(message.splitlines()) == 1 and "Traceback" not in message, message
                assert "fusermount3 -u" in message or "umount" in message, (
                    f"the refusal does not say how to clear the dead mount: {message!r}")
        finally:
            subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True)
            if is_mounted(mountpoint):
                subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], capture_output=True)
        assert not is_mounted(mountpoint)
