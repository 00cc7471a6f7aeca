"""Coherence within one mount: writes through two views of the same array at once do not hang.

test_writes_through_data_and_data_npy_at_once: two processes write 16 bytes at a time, one
through `data`, one through `data.npy` (other elements, other pages), 300 writes each; both
must finish within HANG_TIMEOUT seconds (they take about one).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.coherence import (
    CACHE,
    View,
    child,
    collect,
    create_array,
    npy_header_length,
    report,
    spawn,
)
from tests.helpers.mounting import mounted

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)


# -- writes through `data` and `data.npy` at once ----------------------------------------------

HANG_TIMEOUT = 15.0
CROSS_WRITES = 300


def cross_writer_main(mountpoint: str, through: str, row: int, barrier: Any) -> dict[str, Any]:
    """Write 4 elements of `row` through `through` (data or data.npy) CROSS_WRITES times, then
    read the last write back through the other view. (Not each write: a read would bring the
    page into the cache, and the hang needs writes into pages the kernel does not have.)"""
    header = npy_header_length(mountpoint)
    views = {"data": View("data"), "data.npy": View("data.npy", header)}
    mine, other = views[through], views["data.npy" if through == "data" else "data"]
    fd = os.open(os.path.join(mountpoint, mine.name), os.O_RDWR)
    reader = os.open(os.path.join(mountpoint, other.name), os.O_RDONLY)
    rows, cols = np.full(4, row), np.arange(4)
    mismatches = 0
    barrier.wait()
    try:
        for n in range(CROSS_WRITES):
            values = np.full(4, row << 16 | n, np.uint32)
            mine.write_run(fd, row, 0, values)
        mismatches += int(not np.array_equal(other.read(reader, rows, cols), values))
    finally:
        os.close(fd)
        os.close(reader)
    return {"writes": CROSS_WRITES, "mismatches": mismatches}


def test_writes_through_data_and_data_npy_at_once(tmp_path: Path,
                                                  request: pytest.FixtureRequest) -> None:
    """Two processes write at once, one through `data` (elements 0-3 of row 0), the other
    through `data.npy` (elements 0-3 of row 2: other elements, another page), 16 bytes a
    write, 300 writes each. Both must finish (within HANG_TIMEOUT s; they take about one), and
    read their last write back through the other view."""
    root = tmp_path / "array.zarr"
    create_array(root)
    context = spawn()
    started = time.monotonic()
    with mounted(root, tmp_path / "mnt", [f"cache={CACHE}"]) as mount:
        barrier = context.Barrier(2, timeout=120)
        results = context.Queue()
        processes = [
            context.Process(target=child, name=through,
                            args=(cross_writer_main, through, results, str(mount.path), through,
                                  row, barrier))
            for through, row in (("data", 0), ("data.npy", 2))
        ]
        for p in processes:
            p.start()
        found: dict[str, dict[str, Any]] = {}
        try:
            found = collect(mount, processes, results, {"data", "data.npy"}, HANG_TIMEOUT)
        finally:
            seconds = time.monotonic() - started
            report(request, {"test": "coherence-cross-writes", "finished": bool(found),
                             **{f"{name} {k}": v for name, got in found.items()
                                for k, v in got.items()}, "seconds": round(seconds, 1)},
                   f"writes through data and data.npy at once: "
                   f"{'finished: ' + str(found) if found else 'HUNG'} after {seconds:.0f} s")
        assert mount.unmount() == 0, mount.log()[-3000:]
    assert found["data"]["mismatches"] == found["data.npy"]["mismatches"] == 0, found
