"""What the coherence tests (tests/reliability/test_coherence_*.py) share: the array, where its
elements are in each view, and child processes run under a deadline.

An array directory shows its elements three times: `data` (the whole array, flat C order,
little-endian, served with the kernel's page cache), `data.npy` (an .npy header, then the bytes
of `data`; page cache too) and `chunks/c/I/J` (one file per chunk, direct_io). The promise:
after a write() to any of them returns, a read() of any file of the mount showing the same
bytes returns the new bytes, through an fd opened before the write (its pages warm in the
kernel's cache) or after it; and no read mixes two versions of one chunk.

The array: uint32, 2048 x 1024, chunks of 64 x 128 (32 KiB each, zstd; 32 x 8 chunks, 8 MiB),
created with zarr-python, mounted read-write with cache=2M, so chunks are written back,
evicted and reloaded all the time. A row of `data` is 4096 bytes, one page; `data.npy`'s
pages straddle two rows (its header is 128 bytes).

Soak: ZARRFS_SOAK_ROUNDS=N runs the main test (test_coherence_rounds.py) and the torn-read
tests (test_coherence_torn.py) N times each (each run a fresh array and mount; the
data/data.npy writers test runs once). Seeds:
ZARRFS_SEED=S repeats a run. The figures (rounds, reads checked, stale, torn, background
writes checked) are printed at the end of each test and, when ZARRFS_STATS names a file,
appended to it as one JSON line per test.

    ZARRFS_SOAK_ROUNDS=20 .venv/bin/pytest tests/reliability/test_coherence_rounds.py \
        tests/reliability/test_coherence_torn.py
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.figures import report_figures
from tests.helpers.mounting import Mount, abort_connection, fuse_connection, kernel_stacks, mounted

SOAK_RUNS = max(1, int(os.environ.get("ZARRFS_SOAK_ROUNDS", "1") or 1))


SHAPE = (2048, 1024)
CHUNKS = (64, 128)


CACHE = "2M"
ITEM = 4


INITIAL_MARK = 0x8000_0000  # initial values have the top bit; written values never do


TIMEOUT = 240.0  # seconds a run may take before it counts as hung
BASE_SEED = int(os.environ.get("ZARRFS_SEED", time.time_ns() % (1 << 32)))

TOTALS: Counter[str] = Counter()


def initial(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    return (INITIAL_MARK | (rows * SHAPE[1] + cols)).astype(np.uint32)


# -- where elements are in each view ----------------------------------------------------------


def chunk_name(i: int, j: int) -> str:
    return f"chunks/c/{i}/{j}"


def npy_header_length(mountpoint: str) -> int:
    with open(os.path.join(mountpoint, "data.npy"), "rb") as f:
        major, _ = np.lib.format.read_magic(f)
        if major == 1:
            np.lib.format.read_array_header_1_0(f)
        else:
            np.lib.format.read_array_header_2_0(f)
        return f.tell()


@dataclass(frozen=True)
class View:
    """A file of the mount and where element (row, col) of the array is in it."""

    name: str  # "data", "data.npy" or "chunks/c/I/J"
    header: int = 0
    chunk: tuple[int, int] | None = None

    @property
    def kind(self) -> str:
        return "chunk" if self.chunk else ("npy" if self.header else "data")

    def positions(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        if self.chunk is None:
            return rows * SHAPE[1] + cols
        i, j = self.chunk
        return (rows - i * CHUNKS[0]) * CHUNKS[1] + (cols - j * CHUNKS[1])

    def read(self, fd: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """The elements at (rows, cols), with one pread of the span holding them all."""
        where = self.positions(rows, cols)
        first, last = int(where.min()), int(where.max()) + 1
        raw = os.pread(fd, (last - first) * ITEM, self.header + first * ITEM)
        assert len(raw) == (last - first) * ITEM, f"{self.name}: short read of {len(raw)} bytes"
        return np.frombuffer(raw, "<u4")[where - first]

    def write_run(self, fd: int, row: int, c0: int, values: np.ndarray) -> None:
        """One pwrite of a run of columns [c0, c0 + len(values)) of one row."""
        offset = self.header + int(self.positions(np.array([row]), np.array([c0]))[0]) * ITEM
        payload = values.astype("<u4").tobytes()
        written = os.pwrite(fd, payload, offset)
        assert written == len(payload), f"{self.name}: short write of {written} bytes"


# -- running processes under a deadline -------------------------------------------------------


def spawn() -> Any:
    return mp.get_context("spawn")


def child(target: Callable[..., dict[str, Any]], name: str, results: Any, *args: Any) -> None:
    """A child process: run `target` and put (name, result) or (name, traceback) on the queue."""
    try:
        results.put((name, target(*args), None))
    except BaseException:
        results.put((name, None, traceback.format_exc()))


def collect(mount: Mount, processes: list[Any], results: Any, names: set[str],
            timeout: float) -> dict[str, dict[str, Any]]:
    """Every child's result; a child that failed fails the test with its traceback; children
    still running after `timeout` seconds (a hang) fail it with kernel stacks, after the
    connection is aborted so that nothing stays stuck."""
    found: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    deadline = time.monotonic() + timeout
    while len(found) + len(errors) < len(names) and time.monotonic() < deadline:
        try:
            name, result, error = results.get(timeout=1.0)
        except queue.Empty:
            dead = [p for p in processes if p.exitcode not in (None, 0)]
            if dead:  # killed by a signal before it could report
                errors.append(f"{dead[0].name} died with exit code {dead[0].exitcode}")
                break
            continue
        if error is not None:
            errors.append(f"{name}:\n{error}")
            break  # the others may wait for it at a barrier: they are killed below
        else:
            found[name] = result
    if len(found) + len(errors) < len(names) and not errors:
        pids = [mount.process.pid] + [p.pid for p in processes if p.is_alive()]
        stacks = kernel_stacks(pids)
        abort_connection(fuse_connection(mount.path), mount.path)
        for p in processes:
            p.kill()
            p.join(10)
        raise AssertionError(f"processes {sorted(names - set(found))} still running {timeout:.0f} s "
                             f"after the start (a hang?); kernel stacks:\n{stacks}\n"
                             f"{mount.log()[-3000:]}")
    for p in processes:
        p.join(None if not errors else 5)
        if p.is_alive():
            p.kill()
            p.join(10)
    assert not errors, errors[0][-4000:] + "\n" + mount.log()[-2000:]
    return found


# -- the array --------------------------------------------------------------------------------


def create_array(root: Path) -> None:
    import zarr

    array = zarr.create_array(store=str(root), shape=SHAPE, chunks=CHUNKS, dtype="<u4",
                              fill_value=0, compressors=zarr.codecs.ZstdCodec(level=1))
    rows = np.arange(SHAPE[0])[:, None]
    array[...] = initial(rows, np.arange(SHAPE[1])[None, :])


def run_children(tmp_path: Path, start: Callable[[Any, str, Any], tuple[list[Any], list[Any]]],
                 ) -> tuple[dict[str, Any], float]:
    """Mount a fresh array and run to the end the child processes `start(context, mountpoint,
    results)` makes (with the objects they share, which must live as long as they run:
    Process.start drops its arguments, and a semaphore collected before a spawned child
    unpickles it is gone); what each found, and the seconds it all took. The daemon must
    still answer afterwards and unmount cleanly."""
    root = tmp_path / "array.zarr"
    create_array(root)
    context = spawn()
    started = time.monotonic()
    with mounted(root, tmp_path / "mnt", [f"cache={CACHE}"]) as mount:
        results = context.Queue()
        processes, shared = start(context, str(mount.path), results)
        for p in processes:
            p.start()
        found = collect(mount, processes, results, {p.name for p in processes}, TIMEOUT)
        os.stat(mount.data)  # the daemon still answers
        assert mount.unmount() == 0, mount.log()[-3000:]
    del shared
    return found, time.monotonic() - started


def report(request: pytest.FixtureRequest, record: dict[str, Any], line: str) -> None:
    report_figures(request.config, line, record)
