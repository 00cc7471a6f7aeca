#!/usr/bin/env python3
"""zarrfs benchmark, page faults: `np.memmap(data).sum()` of a (4096, 4096) float32 array on a
fresh mount each run (its store's files in the page cache), with the window the mount chooses
and with `-o readahead=1024`, against TensorStore and zarr-python reading and summing the
whole array; an array of small chunks (32 x 32: 16,384 chunks of 4 KiB) and one of large
(512 x 512), zstd level 1, local. A page fault reads the kernel's window around the page, so
the window a mount gets is what a memmap reader is served at.

    .venv/bin/python benchmarks/memmap_reads.py [--repeat 3]

Prints a Markdown table of medians (seconds); the runs alternate, one of each case a round.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tensorstore as ts
import zarr
from zarr.codecs import ZstdCodec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zarrfs_bench.common import VENV_BIN, alternated_medians
from zarrfs_bench.mounting import Mount

SHAPE = (4096, 4096)
CHUNKS = {"32 x 32": (32, 32), "512 x 512": (512, 512)}


def make(path: Path, chunks: tuple[int, int]) -> float:
    data = np.random.default_rng(3).random(SHAPE, dtype=np.float32)
    array = zarr.create_array(path, shape=SHAPE, dtype="float32", chunks=chunks,
                              compressors=ZstdCodec(level=1), fill_value=0)
    array[...] = data
    return float(data.sum(dtype=np.float64))


def timed(action: Callable[[], float], expected: float) -> float:
    start = time.perf_counter()
    got = action()
    seconds = time.perf_counter() - start
    assert abs(got - expected) <= 1e-6 * abs(expected), (got, expected)
    return seconds


def memmap_sum(store: Path, mountpoint: Path, options: str, expected: float) -> Callable[[], float]:
    """The seconds of the sum alone, on a mount made before it (and gone after)."""
    def run() -> float:
        with Mount(str(VENV_BIN / "zarrfs"), store, mountpoint, options):
            return timed(lambda: mapped_sum(mountpoint / "data"), expected)
    return run


def mapped_sum(path: Path) -> float:
    """The sum through a mapping, unmapped when done (its last reference gone: a file mapped
    keeps the mount busy)."""
    mapped = np.memmap(path, dtype="<f4", mode="r", shape=SHAPE)
    total = float(mapped.sum(dtype=np.float64))
    del mapped
    return total


def in_process(read_sum: Callable[[Path], float], store: Path, expected: float) -> Callable[[], float]:
    return lambda: timed(lambda: read_sum(store), expected)


def tensorstore_sum(store: Path) -> float:
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(store)}}
    return float(ts.open(spec).result().read().result().sum(dtype=np.float64))


def zarr_sum(store: Path) -> float:
    return float(zarr.open_array(store, mode="r")[...].sum(dtype=np.float64))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="zarrfs-memmap-") as tmp:
        root = Path(tmp)
        for label, chunks in CHUNKS.items():
            store = root / f"{chunks[0]}.zarr"
            expected = make(store, chunks)
            cases = {"default mount": memmap_sum(store, root / "mnt", "ro", expected),
                     "readahead=1024": memmap_sum(store, root / "mnt", "ro,readahead=1024", expected),
                     "TensorStore": in_process(tensorstore_sum, store, expected),
                     "zarr-python": in_process(zarr_sum, store, expected)}
            rows.append((label, alternated_medians(cases, args.repeat)))
    names = list(rows[0][1])
    print("| chunks | " + " | ".join(names) + " | default / readahead=1024 |")
    print("|---" * (len(names) + 2) + "|")
    for label, medians in rows:
        ratio = medians["default mount"] / medians["readahead=1024"]
        print(f"| {label} | " + " | ".join(f"{medians[n]:.3f}" for n in names) + f" | {ratio:.2f} |")


if __name__ == "__main__":
    main()
