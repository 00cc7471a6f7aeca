#!/usr/bin/env python3
"""zarrfs benchmark, strings in data.h5: what an array of variable-length strings costs through
`data.h5` (HDF5 variable-length strings whose heaps follow the chunks), on a fresh mount each
run: the first `stat` (which decodes every chunk to size the heaps), then h5py reading 10
strings in the middle and the whole array, against the first `stat` of `data.txt` (which
decodes every chunk too) and zarr-python reading the store.

    .venv/bin/python benchmarks/h5_strings.py [--strings 1000000] [--chunk 10000] [--repeat 3]

Prints a Markdown table of medians (seconds) and the file's size.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zarrfs_bench.common import VENV_BIN
from zarrfs_bench.mounting import Mount


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def one_run(store: Path, mountpoint: Path, count: int) -> dict[str, float]:
    with Mount(str(VENV_BIN / "zarrfs"), store, mountpoint, "ro"):
        h5, text = mountpoint / "data.h5", mountpoint / "data.txt"
        figures = {"first stat of data.h5": timed(lambda: os.stat(h5)),
                   "first stat of data.txt": timed(lambda: os.stat(text)),
                   "stat of data.h5 again": timed(lambda: os.stat(h5))}
        with h5py.File(h5, "r") as f:
            figures["h5py: 10 strings"] = timed(lambda: f["data"][count // 2:count // 2 + 10])
            figures["h5py: every string"] = timed(lambda: f["data"][...])
        figures["size of data.h5 (MB)"] = os.stat(h5).st_size / 1e6
    figures["zarr-python: every string"] = timed(lambda: zarr.open_array(store, mode="r")[...])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strings", type=int, default=1_000_000)
    parser.add_argument("--chunk", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="h5-strings-") as work:
        store = Path(work) / "names.zarr"
        array = zarr.create_array(store, shape=(args.strings,), chunks=(args.chunk,), dtype=str,
                                  zarr_format=3)
        array[:] = np.array([f"station {n} name" for n in range(args.strings)], dtype=object)
        runs = []
        for number in range(args.repeat):
            mountpoint = Path(work) / f"mnt{number}"
            mountpoint.mkdir()
            runs.append(one_run(store, mountpoint, args.strings))
    print(f"{args.strings:,} strings in chunks of {args.chunk:,} (v3, zstd), "
          f"median of {args.repeat} mounts\n")
    print("| what | median (seconds; the size in MB) |\n|---|---|")
    for name in runs[0]:
        print(f"| {name} | {statistics.median(run[name] for run in runs):.3f} |")


if __name__ == "__main__":
    main()
