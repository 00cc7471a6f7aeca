"""A real mount driven by random operations and checked against a numpy model.

A Hypothesis state machine opens, reads and writes the files of a mounted array exactly as a
program would: `pread`, `pwrite` (element-aligned or not; in chunk files up to and past the
end: EFBIG; `data` would grow, which test_resize_grow.py covers),
writes through a shared `mmap` of `data` (with or without `msync`; chunk files are direct_io
and refuse shared mappings), whole-file and partial chunk-file writes (an edge chunk's
overhang keeps the fill value), `fsync`, close and reopen, unmount and remount. The model is
the flat file itself (a numpy array in the file's byte order). After every step `data` and
every chunk file read back equal the model byte for byte; after every `fsync`, close and
unmount TensorStore, reading the store directly, finds the model exactly.

Layouts: plain chunks; shards with the index at the end and at the start; shards of shards;
transpose + big-endian bytes codec (mounted with endian=big, in 3-D); "v2" chunk keys; a
float32 array whose fill value is NaN. Each is small (3-13 KB), with partial edge chunks.

Bounded for CI: 5 examples of 25 steps per layout, about 30 s for the file, most of it
mounting. A longer soak run, N examples of 50 steps per layout (about 2 s per example, so
N=500 takes two hours):

    ZARRFS_SOAK=500 .venv/bin/pytest tests/reliability/test_mount_model.py

With CI set the examples are the same on every run. A failure prints the whole sequence of
steps; shrinking it (many remounts: minutes) is off unless ZARRFS_SHRINK=1. The number of
random steps run is printed at the end of the module (visible with -q too) and, when
ZARRFS_STATS names a file, appended to it as one JSON line.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis.stateful import run_state_machine_as_test

from tests.helpers.figures import report_figures
from tests.helpers.mount_machine import MountMachine
from tests.helpers.mount_model import LAYOUTS, MODEL_SETTINGS, STATS, Layout

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)


@pytest.fixture(scope="module", autouse=True)
def _print_step_count(request: pytest.FixtureRequest) -> Iterator[None]:
    started = time.monotonic()
    yield
    seconds = time.monotonic() - started
    report_figures(request.config,
            f"mount model: {STATS['steps']} random steps in {STATS['examples']} examples "
            f"({STATS['remounts']} remounts, {STATS['store_checks']} store checks) "
            f"in {seconds:.0f} s",
            {"test": "mount_model", **STATS, "seconds": round(seconds, 1)})


@pytest.mark.parametrize("layout", LAYOUTS, ids=[layout.name for layout in LAYOUTS])
def test_mount_behaves_like_the_model(layout: Layout, tmp_path: Path) -> None:
    run_state_machine_as_test(lambda: MountMachine(layout, tmp_path), settings=MODEL_SETTINGS)
