#!/usr/bin/env python3
"""zarrfs benchmark, data.h5: random chunks of an array read through `data.h5` with h5py
(hdf5plugin's zstd: the chunks are the stored ones, the mount decodes nothing) on a fresh
mount each run, against zarr-python and TensorStore reading the same chunks of the store;
for an array of 16^2 chunks and one of 1,000^2 (sparse: the chunks read are stored).

    .venv/bin/python benchmarks/hdf5_reads.py [--chunks 64] [--repeat 3]

Prints a Markdown table of medians (seconds for all the chunks, and per chunk).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import h5py
import hdf5plugin  # noqa: F401  (the zstd filter)
import numpy as np
import tensorstore as ts
import zarr
from zarr.codecs import ZstdCodec

ZARRFS = str(Path(sys.executable).with_name("zarrfs"))
CHUNK = (256, 256)
Box = tuple[slice, slice]


def make(path: Path, grid: int, picked: list[tuple[int, int]]) -> None:
    """A uint16 array of grid^2 chunks of CHUNK; only the `picked` ones written."""
    array = zarr.create_array(path, shape=(grid * CHUNK[0], grid * CHUNK[1]), chunks=CHUNK, dtype="uint16",
                              compressors=ZstdCodec(level=1), fill_value=0)
    rng = np.random.default_rng(0)
    for i, j in picked:
        array[_box((i, j))] = rng.integers(0, 4000, CHUNK, dtype="uint16")


def _box(chunk: tuple[int, int]) -> Box:
    return (slice(chunk[0] * CHUNK[0], (chunk[0] + 1) * CHUNK[0]),
            slice(chunk[1] * CHUNK[1], (chunk[1] + 1) * CHUNK[1]))


def through_h5(store: Path, boxes: list[Box]) -> float:
    with tempfile.TemporaryDirectory() as mountpoint:
        daemon = subprocess.Popen([ZARRFS, "mount", "-f", str(store), mountpoint, "-o", "ro"])
        try:
            while not Path(mountpoint, "data.h5").exists():
                time.sleep(0.05)
            start = time.perf_counter()
            with h5py.File(Path(mountpoint, "data.h5"), "r") as f:
                for box in boxes:
                    f["data"][box]
            return time.perf_counter() - start
        finally:
            subprocess.run(["fusermount3", "-u", mountpoint], check=False)
            daemon.wait(30)


def with_zarr(store: Path, boxes: list[Box]) -> float:
    start = time.perf_counter()
    array = zarr.open_array(store, mode="r")
    for box in boxes:
        array[box]
    return time.perf_counter() - start


def with_tensorstore(store: Path, boxes: list[Box]) -> float:
    start = time.perf_counter()
    array = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(store)}}).result()
    for box in boxes:
        array[box].read().result()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    readers: dict[str, Callable[[Path, list[Box]], float]] = {
        "h5py via data.h5": through_h5, "zarr-python": with_zarr, "TensorStore": with_tensorstore}
    print("| array | reader | seconds | ms per chunk |\n|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for grid in (16, 1000):
            rng = np.random.default_rng(grid)
            picked = sorted({(int(i), int(j)) for i, j in rng.integers(0, grid, (args.chunks, 2))})
            store = Path(scratch, f"a{grid}.zarr")
            make(store, grid, picked)
            boxes = [_box(chunk) for chunk in picked]
            for name, reader in readers.items():
                seconds = statistics.median(reader(store, boxes) for _ in range(args.repeat))
                print(f"| {grid}^2 chunks | {name} | {seconds:.3f} | {1000 * seconds / len(boxes):.2f} |")


if __name__ == "__main__":
    main()
