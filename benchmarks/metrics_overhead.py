#!/usr/bin/env python3
"""What `-o metrics=` costs on the hot path: cold `dd bs=1M` of `data` (a float32 zstd array
of `--size`, 1 MiB chunks, on tmpfs) through fresh mounts with and without metrics, the two
alternating run by run; MB/s, the daemon's CPU seconds during the dd and its peak RSS
(medians of `--pairs` runs each). (No scrape during the dd: Prometheus scrapes every 15 s or
so, and a scrape costs the daemon a snapshot of its counters, not per-request work.)

    .venv/bin/python benchmarks/metrics_overhead.py [--pairs 3] [--size 256M]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import zarr
from zarrfs_bench.ab import alternate, cold_dd, report
from zarrfs_bench.common import parse_size

import zarrfs

TREE = str(Path(zarrfs.__file__).resolve().parent.parent)


def make_array(path: Path, nbytes: int) -> None:
    rows = nbytes // (1024 * 4)
    array = zarr.create_array(str(path), shape=(rows, 1024), chunks=(256, 1024), dtype="float32")
    values = np.arange(rows * 1024, dtype="float32").reshape(rows, 1024)
    array[...] = np.sin(values)  # (compresses somewhat, as measured data does)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--size", type=parse_size, default=parse_size("256M"))
    a = p.parse_args()
    with tempfile.TemporaryDirectory(dir="/dev/shm") as work:
        source = Path(work) / "array.zarr"
        make_array(source, a.size)
        mountpoint, logfile = Path(work) / "mnt", Path(work) / "daemon.log"
        mountpoint.mkdir()

        def one(opts: str, pair: int) -> dict[str, float]:
            return cold_dd(TREE, str(source), opts, mountpoint, a.size, logfile)

        variants = [("without metrics", "ro"), ("with metrics", "ro,metrics=127.0.0.1:0")]
        runs = alternate(variants, a.pairs, one)
    report(f"cold dd of a {a.size >> 20} MiB float32 zstd array (tmpfs), medians of {a.pairs}", runs)


if __name__ == "__main__":
    main()
