"""A mount made by `zarrfs.mount` ends with the process that made it: killed (SIGKILL, as a
lost Dask worker is), the daemon writes back what it was given, unmounts and removes the
temporary mountpoint, so nothing is left behind. `outlive=True` keeps it serving."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import is_mounted

SHAPE = (40, 60)
ENDS_WITHIN = 60.0  # (the daemon's write-back and unmount, on a loaded machine)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "array.zarr"
    zarr.create_array(str(path), shape=SHAPE, chunks=(10, 20), dtype="uint16", fill_value=0)
    return path


def mounting_process(source: Path, tmp: Path, **keywords: object) -> tuple[subprocess.Popen[str], Path, int]:
    """A Python process that mounts `source` read-write, writes row 3 through an open file it
    keeps open, says where and which daemon, then waits to be killed."""
    script = textwrap.dedent(f"""
        import os, sys, time, zarrfs
        m = zarrfs.mount({str(source)!r}, rw=True, **{keywords!r})
        f = open(m.path / "data", "r+b")
        f.seek(3 * {SHAPE[1]} * 2)
        f.write(bytes(range(2 * {SHAPE[1]})))
        f.flush()
        print(m.path, m.process.pid, flush=True)
        time.sleep(600)
    """)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "TMPDIR": str(tmp)})
    assert process.stdout is not None
    path, pid = process.stdout.readline().split()
    return process, Path(path), int(pid)


def ended(pid: int) -> bool:
    """Whether the process exited (reaped, or a zombie its new parent has not reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


def test_a_killed_process_leaves_no_mount_no_daemon_and_no_directory(source: Path, tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    process, path, daemon = mounting_process(source, tmp)
    assert is_mounted(path)
    process.send_signal(signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + ENDS_WITHIN
    while not ended(daemon) or is_mounted(path):
        assert time.monotonic() < deadline, "the mount outlived the process that made it"
        time.sleep(0.1)
    assert list(tmp.iterdir()) == []  # (the mountpoint, the log and their directory)
    row = np.asarray(zarr.open_array(str(source), mode="r")[3])
    assert row.tobytes() == bytes(range(2 * SHAPE[1]))


def test_outlive_keeps_serving_after_the_process(source: Path, tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    process, path, daemon = mounting_process(source, tmp, outlive=True)
    try:
        process.send_signal(signal.SIGKILL)
        process.wait()
        time.sleep(2.0)  # (what a daemon that ends with it would have begun by now)
        assert is_mounted(path) and not ended(daemon)
        assert (path / "data").read_bytes()[3 * SHAPE[1] * 2:4 * SHAPE[1] * 2] == bytes(range(2 * SHAPE[1]))
    finally:
        subprocess.run(["fusermount3", "-u", str(path)], check=False)
        deadline = time.monotonic() + ENDS_WITHIN
        while not ended(daemon) and time.monotonic() < deadline:
            time.sleep(0.1)
    assert ended(daemon) and not is_mounted(path)
