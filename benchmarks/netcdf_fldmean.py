"""`cdo fldmean` over one ~256 MiB float32 variable of a group's `data.nc`: through the mount
(a fresh mount each run: nothing decoded yet, the kernel's pages dropped with it) against
the same reader on a local copy of the file made with `cp` (in the page cache, as a local
file read twice is), medians of N runs, the two outputs compared.

    .venv/bin/python benchmarks/netcdf_fldmean.py [--repeat 3] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
import zarr

SHAPE = (64, 1024, 1024)  # float32: 256 MiB
CHUNKS = (4, 512, 512)  # 4 MiB chunks, zstd (zarr-python's default for v3)
T = TypeVar("T")


def make_group(path: Path) -> np.ndarray:
    rng = np.random.default_rng(0)
    root = zarr.open_group(path, mode="w", zarr_format=3)
    array = root.create_array("v", shape=SHAPE, chunks=CHUNKS, dtype="f4",
                              dimension_names=["time", "y", "x"])
    means = np.empty(SHAPE[0])
    ramp = np.linspace(0, 1, SHAPE[2], dtype="f4")
    for t in range(0, SHAPE[0], CHUNKS[0]):
        block = ramp + rng.standard_normal((CHUNKS[0], *SHAPE[1:]), dtype="f4") * 0.01 + np.float32(t)
        array[t : t + CHUNKS[0]] = block
        means[t : t + CHUNKS[0]] = block.reshape(CHUNKS[0], -1).mean(axis=1, dtype="f8")
    return means


def fldmean(path: Path) -> tuple[np.ndarray, float]:
    began = time.perf_counter()
    out = subprocess.run(["cdo", "-s", "outputf,%.9g", "-fldmean", "-selname,v", str(path)],
                         check=True, capture_output=True, text=True).stdout
    return np.array([float(v) for v in out.split()]), time.perf_counter() - began


def with_mount(store: Path, mountpoint: Path, action: Callable[[Path], T]) -> T:
    mountpoint.mkdir(exist_ok=True)
    daemon = subprocess.Popen(["zarrfs", "mount", "-f", str(store), str(mountpoint)])
    try:
        deadline = time.monotonic() + 30
        while not (mountpoint / "data.nc").exists():
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise RuntimeError("the mount did not come up")
            time.sleep(0.05)
        return action(mountpoint / "data.nc")
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=False)
        daemon.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="zarrfs-nc-", dir=args.workdir))
    try:
        expected = make_group(work / "g.zarr")
        mounted = [with_mount(work / "g.zarr", work / "mnt", fldmean) for _ in range(args.repeat)]
        copy = work / "copy.nc"
        with_mount(work / "g.zarr", work / "mnt", lambda nc: subprocess.run(["cp", nc, copy], check=True))
        local = [fldmean(copy) for _ in range(args.repeat)]
        for means, _ in [*mounted, *local]:
            np.testing.assert_allclose(means, expected, rtol=1e-5)
        through = statistics.median(t for _, t in mounted)
        copied = statistics.median(t for _, t in local)
        print(f"cdo fldmean, {int(np.prod(SHAPE)) * 4 >> 20} MiB float32, zstd {CHUNKS} chunks, "
              f"medians of {args.repeat}:")
        print(f"  through the mount (cold): {through:.2f} s; local copy: {copied:.2f} s; "
              f"ratio {copied / through:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
