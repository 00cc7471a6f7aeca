#!/usr/bin/env python3
"""zarrfs benchmark, page faults: `np.memmap(data).sum()` of a (4096, 4096) float32 array on a
fresh mount each run (its store's files in the page cache), with the window the mount chooses
and with `-o readahead=1024` and with `-o push_pages=no` (no pages pushed ahead: zarrfs.fuse.pages),
against TensorStore and zarr-python reading and summing the
whole array; an array of small chunks (32 x 32: 16,384 chunks of 4 KiB) and one of large
(512 x 512), zstd level 1, local and (--s3) on a moto S3 server behind a proxy adding 10 ms
each way (a 20 ms round trip: zarrfs_bench/places.py). A page fault reads the kernel's window
around the page, so the window a mount gets is what a memmap reader is served at.

    .venv/bin/python benchmarks/memmap_reads.py [--repeat 3] [--s3]

Prints a Markdown table of medians (seconds); the runs alternate, one of each case a round.
"""

from __future__ import annotations

import argparse
import contextlib
import os
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
from zarrfs_bench.places import Where, on_s3

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


def memmap_sum(store: Where, mountpoint: Path, options: str, expected: float) -> Callable[[], float]:
    """The seconds of the sum alone, on a mount made before it (and gone after)."""
    def run() -> float:
        with Mount(str(VENV_BIN / "zarrfs"), store.url, mountpoint, store.mount_options(options)):
            return timed(lambda: mapped_sum(mountpoint / "data"), expected)
    return run


def mapped_sum(path: Path) -> float:
    """The sum through a mapping, unmapped when done (its last reference gone: a file mapped
    keeps the mount busy)."""
    mapped = np.memmap(path, dtype="<f4", mode="r", shape=SHAPE)
    total = float(mapped.sum(dtype=np.float64))
    del mapped
    return total


def in_process(read_sum: Callable[[Where], float], store: Where, expected: float) -> Callable[[], float]:
    return lambda: timed(lambda: read_sum(store), expected)


def tensorstore_sum(store: Where) -> float:
    spec = {"driver": "zarr3", "kvstore": store.kvstore()}
    return float(ts.open(spec).result().read().result().sum(dtype=np.float64))


def zarr_sum(store: Where) -> float:
    array = zarr.open_array(store.url, mode="r", storage_options=store.storage_options())
    return float(np.asarray(array[...]).sum(dtype=np.float64))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--s3", action="store_true", help="also on S3 behind a 20 ms proxy")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="zarrfs-memmap-") as tmp, contextlib.ExitStack() as stack:
        root = Path(tmp)
        stores = {label: root / f"{chunks[0]}.zarr" for label, chunks in CHUNKS.items()}
        expected = {label: make(stores[label], chunks) for label, chunks in CHUNKS.items()}
        places = [("local", {label: Where(str(store)) for label, store in stores.items()})]
        if args.s3:
            on_bucket = stack.enter_context(on_s3(list(stores.values()), root / "s3.log"))
            places.append(("S3 + 20 ms", dict(zip(stores, on_bucket, strict=True))))
        for place, wheres in places:
            for label, where in wheres.items():
                cases = {"default mount": memmap_sum(where, root / "mnt", "", expected[label]),
                         "push_pages=no": memmap_sum(where, root / "mnt", "push_pages=no", expected[label]),
                         "readahead=1024": memmap_sum(where, root / "mnt", "readahead=1024", expected[label]),
                         "TensorStore": in_process(tensorstore_sum, where, expected[label]),
                         "zarr-python": in_process(zarr_sum, where, expected[label])}
                rows.append((label, place, alternated_medians(cases, args.repeat)))
    print(f"load average {os.getloadavg()[0]:.1f}\n")
    names = list(rows[0][2])
    print("| chunks | where | " + " | ".join(names) + " | default / readahead=1024 | default / TensorStore |")
    print("|---" * (len(names) + 4) + "|")
    for label, place, medians in rows:
        ratios = (medians["default mount"] / medians["readahead=1024"],
                  medians["default mount"] / medians["TensorStore"])
        print(f"| {label} | {place} | " + " | ".join(f"{medians[n]:.3f}" for n in names)
              + " | " + " | ".join(f"{ratio:.2f}" for ratio in ratios) + " |")


if __name__ == "__main__":
    main()
