"""Small reads of `data` by the three ways tools read a file (issue 58): `pread` (what they ask
is what the kernel asks), Python's buffered `read` (a whole `st_blksize` block) and `mmap` (the
kernel's readahead window around the page), each cold on a fresh mount, against TensorStore
reading the same elements; with the store requests each made (TensorStore's: the chunks its
read touches, which it reads once each).

The canvas: 1 KiB across the middle stored chunk of a 1,000,000 x 1,000,000 uint8 canvas in
32 x 32 chunks with three chunks stored (local), and of its 4,096-chunk twin (2,048 x 2,048,
every chunk stored): what a missing chunk costs, a lookup each.
"""

from __future__ import annotations

import functools
import mmap
import os
import time
from pathlib import Path
from typing import Any

from .arrays import ts_open
from .common import log, median

READERS = ("pread", "buffered", "mmap")
CANVAS_CHUNK = (32, 32)
CANVAS_READ = 1 << 10
TARGET_TS = 3.0  # a cold small read on S3 within 3x TensorStore's time ...
TARGET_REQUESTS = 2.0  # ... in at most 2x its requests (plus the metadata)
CANVAS_TARGET = (5.0, 0.1)  # the canvas read within 5x TensorStore + 0.1 s


def read_with(how: str, path: Path, offset: int, size: int) -> bytes:
    if how == "pread":
        fd = os.open(path, os.O_RDONLY)
        try:
            return os.pread(fd, size, offset)
        finally:
            os.close(fd)
    with open(path, "rb") as f:
        if how == "buffered":
            f.seek(offset)
            return f.read(size)
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return bytes(m[offset : offset + size])


def ts_requests(shape: tuple[int, int], chunk: tuple[int, int], offset: int, size: int) -> int:
    """The chunks TensorStore reads for the elements of bytes [offset, offset + size) of a
    uint8 `data`, read as `ts_small_read` reads them: whole rows when the run crosses one."""
    first, last = offset // shape[1], (offset + size - 1) // shape[1]
    if first == last:
        return (offset + size - 1) % shape[1] // chunk[1] - offset % shape[1] // chunk[1] + 1
    return (last // chunk[0] - first // chunk[0] + 1) * -(-shape[1] // chunk[1])


def ts_read(where: Path | dict[str, Any], shape: tuple[int, int], offset: int, size: int) -> float:
    """TensorStore opening the array (no cache) and reading the elements of the small read."""
    first, last = offset // shape[1], (offset + size - 1) // shape[1]
    t0 = time.perf_counter()
    array = ts_open(where)
    if first == last:
        start = offset % shape[1]
        array[first, start : start + size].read().result()
    else:
        array[first : last + 1, :].read().result()
    return time.perf_counter() - t0


def verdict(seconds: float | None, requests: float | None, ts_seconds: float | None, ts_reqs: int,
            slack: float = 0.0, target: float = TARGET_TS) -> str:
    if seconds is None or not ts_seconds:
        return "-"
    ratio = seconds / ts_seconds
    ok = seconds <= target * ts_seconds + slack
    asked = f"{ratio:.1f}x TensorStore ({'ok' if ok else 'MISS'})"
    if requests is not None and ts_reqs:
        asked += f", {requests / ts_reqs:.1f}x its {ts_reqs} requests"
    return asked


# -- the canvas ---------------------------------------------------------------------------------


def canvas_twins(data: Path, scale_arrays: Any) -> list[tuple[str, Path, tuple[int, int]]]:
    """The sparse canvas and its 4,096-chunk twin, written once into `data`."""
    made = []
    for label, shape, grid, stored in (
            ("canvas 10^6 x 10^6, 3 chunks stored", (1_000_000, 1_000_000), (31_250, 31_250),
             [(0, 0), (15_625, 15_625), (31_249, 31_249)]),
            ("twin 2,048 x 2,048, 4,096 chunks", (2048, 2048), (64, 64), None)):
        path = data / f"canvas-{shape[0]}.zarr"
        if not (path / "zarr.json").exists():
            scale_arrays.write_twin(path, grid, CANVAS_CHUNK, stored=stored, shape=shape)
        made.append((label, path, shape))
    return made


def canvas_offset(shape: tuple[int, int]) -> int:
    """1 KiB across the first row of the middle chunk (stored in both)."""
    row = shape[0] // CANVAS_CHUNK[0] // 2 * CANVAS_CHUNK[0]
    return row * shape[1] + shape[1] // CANVAS_CHUNK[1] // 2 * CANVAS_CHUNK[1] - 512


def measure_canvas(twins: list[tuple[str, Path, tuple[int, int]]], mounted: Any, repeat: int) -> str:
    """`mounted(path)`: a fresh mount with its request log (scale.Mounted)."""
    lines = ["## A kilobyte of a sparse canvas (benchmarks/scale.py)", "",
             f"Medians of {repeat}; each read cold on a fresh mount, local. Target: within "
             f"{CANVAS_TARGET[0]:g}x TensorStore + {CANVAS_TARGET[1]:g} s.", "",
             "| array | reader | seconds | requests | against TensorStore |", "|---|---|---|---|---|"]
    for label, path, shape in twins:
        offset = canvas_offset(shape)
        ts_read(path, shape, offset, CANVAS_READ)  # (its first call pays for its start)
        ts_seconds = median([ts_read(path, shape, offset, CANVAS_READ) for _ in range(repeat)])
        ts_reqs = ts_requests(shape, CANVAS_CHUNK, offset, CANVAS_READ)
        lines.append(f"| {label} | TensorStore | {ts_seconds:.4f} | {ts_reqs} | |")
        for how in READERS:
            seconds, requests = [], []
            for _ in range(repeat):
                m = mounted(path)
                with m.mount() as mp:
                    read = functools.partial(read_with, how, mp.mp / "data", offset, CANVAS_READ)
                    took, count = m.timed(read)
                seconds.append(took)
                requests.append(float(count))
            s, n = median(seconds), median(requests)
            log(f"scale: canvas {label} {how} {s:.4f} s {n:.0f} requests")
            lines.append(f"| {label} | {how} | {s:.4f} | {n:.0f} | "
                         f"{verdict(s, n, ts_seconds, ts_reqs, CANVAS_TARGET[1], CANVAS_TARGET[0])} |")
    return "\n".join(lines) + "\n"
