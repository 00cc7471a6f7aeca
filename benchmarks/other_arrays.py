#!/usr/bin/env python3
"""zarrfs benchmark, cold reads of arrays other than cold_dd.py's image: other element types,
chunk shapes, ranks, sharded and uncompressed, and a 1 GiB volume whose rows of chunks (512 MiB)
are larger than the cache (issue 87, "how it is judged"). Each array local, its files in the
page cache; each zarrfs read on a fresh mount (the default options), against TensorStore
reading the whole array in-process.

    .venv/bin/python benchmarks/other_arrays.py [--repeat 3] [--only TEXT ...] [--keep DIR]

Per array: TensorStore's read, `dd bs=1M` of `data`, and `np.memmap(data).sum()` (the sum is
checked against TensorStore's values), alternated, one of each a round; prints a Markdown
table of the medians (seconds) and their ratios to TensorStore's time. The arrays are made in
`--keep DIR` (kept for the next run) or in a temporary directory.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tensorstore as ts
import zarr
from zarr.codecs import BloscCodec, ZstdCodec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zarrfs_bench.common import VENV_BIN, dd
from zarrfs_bench.mounting import Mount

LZ4 = BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")
ZSTD = ZstdCodec(level=1)


@dataclass(frozen=True)
class Case:
    name: str
    shape: tuple[int, ...]
    dtype: str
    chunks: tuple[int, ...]
    compressor: Any
    shards: tuple[int, ...] | None = None

    @property
    def directory(self) -> str:
        return "".join(c if c.isalnum() else "_" for c in self.name) + ".zarr"

    def make(self, path: Path) -> None:
        """The array, written a row of chunks at a time (a smooth ramp with noise)."""
        array = zarr.create_array(path, shape=self.shape, dtype=self.dtype, chunks=self.chunks,
                                  shards=self.shards, compressors=self.compressor, fill_value=0)
        step = (self.shards or self.chunks)[0]
        rng = np.random.default_rng(0)
        for start in range(0, self.shape[0], step):
            rows = (min(step, self.shape[0] - start), *self.shape[1:])
            ramp = np.add.reduce(np.indices(rows, dtype=np.int64), axis=0) + start
            noisy = (ramp % 4000) + rng.integers(0, 16, rows)
            array[start : start + rows[0]] = noisy.astype(self.dtype)


CASES = [
    Case("float32, zstd, 1024 x 1024 chunks", (8192, 4096), "float32", (1024, 1024), ZSTD),
    Case("uint8, blosc lz4, 64 x 64 chunks", (4096, 4096), "uint8", (64, 64), LZ4),
    Case("1-D float64, zstd, 1 Mi chunks", (16 << 20,), "float64", (1 << 20,), ZSTD),
    Case("uint16, blosc lz4, edge chunks (5000 x 7000 in 512 x 512)", (5000, 7000), "uint16", (512, 512),
         LZ4),
    Case("3-D uint16, zstd, 64^3 chunks", (256, 512, 512), "uint16", (64, 64, 64), ZSTD),
    Case("3-D uint16, zstd, 64^3 in 256^3 shards", (256, 512, 512), "uint16", (64, 64, 64), ZSTD,
         (256, 256, 256)),
    Case("3-D float32, uncompressed, 128^3 chunks", (256, 512, 256), "float32", (128, 128, 128), None),
    Case("3-D uint16 volume, zstd, 64^3 chunks (1 GiB)", (128, 2048, 2048), "uint16", (64, 64, 64), ZSTD),
]


def warm(path: Path) -> None:
    """The store's files into the page cache (every reader reads them from there)."""
    for file in path.rglob("*"):
        if file.is_file():
            file.read_bytes()


def tensorstore_read(path: Path) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    values = np.asarray(ts.open(spec).result().read().result())
    return time.perf_counter() - start, values


def zarrfs_dd(path: Path, mountpoint: Path, nbytes: int) -> float:
    with Mount(str(VENV_BIN / "zarrfs"), path, mountpoint):
        return dd(mountpoint / "data", "/dev/null", expect=nbytes, timeout=1800)


def zarrfs_memmap_sum(path: Path, mountpoint: Path) -> tuple[float, int]:
    with Mount(str(VENV_BIN / "zarrfs"), path, mountpoint):
        start = time.perf_counter()
        mapped = np.memmap(mountpoint / "data", mode="r", dtype=np.uint8)
        total = int(mapped.sum(dtype=np.uint64))
        seconds = time.perf_counter() - start
        del mapped
        return seconds, total


def measure(case: Case, root: Path, repeat: int) -> str:
    path, mountpoint = root / case.directory, root / "mnt"
    if not (path / "zarr.json").exists():
        shutil.rmtree(path, ignore_errors=True)
        case.make(path)
    mountpoint.mkdir(exist_ok=True)
    warm(path)
    rounds: dict[str, list[float]] = {"ts": [], "dd": [], "memmap": []}
    for _ in range(repeat):
        seconds, values = tensorstore_read(path)
        rounds["ts"].append(seconds)
        rounds["dd"].append(zarrfs_dd(path, mountpoint, values.nbytes))
        seconds, total = zarrfs_memmap_sum(path, mountpoint)
        rounds["memmap"].append(seconds)
        if total != int(values.view(np.uint8).sum(dtype=np.uint64)):
            raise RuntimeError(f"{case.name}: np.memmap of data sums to other bytes than TensorStore read")
    tensorstore, copied, mapped = (statistics.median(rounds[k]) for k in ("ts", "dd", "memmap"))
    return (f"| {case.name} | {values.nbytes / 2**20:,.0f} | {tensorstore:.3f} | {copied:.3f} "
            f"({copied / tensorstore:.2f}x) | {mapped:.3f} ({mapped / tensorstore:.2f}x) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=[], help="the cases whose names contain one of these")
    parser.add_argument("--keep", type=Path, help="make the arrays here, and keep them for the next run")
    args = parser.parse_args()
    cases = [c for c in CASES if not args.only or any(text in c.name for text in args.only)]
    print("| array | MiB | TensorStore s | zarrfs `dd` s (x TensorStore's time) |"
          " zarrfs `np.memmap(data).sum()` s (x) |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="zarrfs-other-arrays-") as scratch:
        root = args.keep or Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        for case in cases:
            print(measure(case, root, args.repeat), flush=True)
    subprocess.run(["sync"], check=False)


if __name__ == "__main__":
    main()
