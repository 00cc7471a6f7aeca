#!/usr/bin/env python3
"""zarrfs benchmark, cold sequential reads: `dd bs=1M` of `data` of a fresh mount (its store's
files in the page cache), against the floor, a bare pyfuse3 passthrough of the same bytes from
tmpfs through the page cache with the same kernel window (`zarrfs_bench/fuse_floor.py`: what
any Python FUSE daemon serves here), and TensorStore reading the whole array in-process.
A (8192, 16384) uint16 image (256 MiB, `--rows` changes it) in 512 x 512 chunks, blosc lz4
with shuffle and zstd level 1, local.

    .venv/bin/python benchmarks/cold_dd.py [--repeat 3] [--rows 8192]

Prints a Markdown table of medians (MB/s); the runs alternate, one of each case a round.
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
from zarr.codecs import BloscCodec, BytesCodec, ZstdCodec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zarrfs_bench.common import VENV_BIN, alternated_medians, dd, kernel_window_setting
from zarrfs_bench.fuse_floor import passed_through
from zarrfs_bench.mounting import Mount

COLUMNS = 16384
CHUNKS = (512, 512)
WINDOW_KB = 1024  # the kernel window zarrfs gives `data` of these chunks (checked below)
CODECS = {
    "blosc lz4 + shuffle": BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=2),
    "zstd level 1": ZstdCodec(level=1),
}


def image(rows: int) -> np.ndarray:
    """A microscope-like image: a smooth field plus noise, 12 bits."""
    rng = np.random.default_rng(7)
    y, x = np.ogrid[:rows, :COLUMNS]
    field = 1500 + 1000 * np.sin(y / 700.0) * np.cos(x / 900.0)
    return (field + rng.normal(0, 40, (rows, COLUMNS))).clip(0, 4095).astype(np.uint16)


def speed(path: Path, nbytes: int) -> float:
    """MB/s of `dd bs=1M` of `path` (its byte count checked)."""
    return nbytes / dd(path, "/dev/null", expect=nbytes) / 1e6


def zarrfs_dd(store: Path, mountpoint: Path, nbytes: int) -> Callable[[], float]:
    def run() -> float:
        with Mount(str(VENV_BIN / "zarrfs"), store, mountpoint, "ro"):
            window = int(kernel_window_setting(mountpoint).read_text())
            assert window == WINDOW_KB, window
            return speed(mountpoint / "data", nbytes)
    return run


def floor_dd(raw: Path, mountpoint: Path, nbytes: int) -> Callable[[], float]:
    def run() -> float:
        with passed_through(raw, mountpoint, 1 << 20, window_kb=WINDOW_KB) as served:
            return speed(served, nbytes)
    return run


def tensorstore_read(store: Path, values: np.ndarray) -> Callable[[], float]:
    def run() -> float:
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(store)}}
        start = time.perf_counter()
        got = ts.open(spec).result().read().result()
        seconds = time.perf_counter() - start
        assert np.array_equal(got, values)
        return values.nbytes / seconds / 1e6
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rows", type=int, default=8192)
    args = parser.parse_args()
    values = image(args.rows)
    rows = []
    with tempfile.TemporaryDirectory(prefix="zarrfs-cold-dd-") as tmp, \
            tempfile.TemporaryDirectory(prefix="zarrfs-floor-", dir="/dev/shm") as shm:
        root = Path(tmp)
        raw = Path(shm) / "data"
        raw.write_bytes(values.tobytes())
        for label, codec in CODECS.items():
            store = root / f"{len(rows)}.zarr"
            zarr.create_array(store, shape=values.shape, dtype=values.dtype, chunks=CHUNKS,
                              serializer=BytesCodec(), compressors=codec, fill_value=0)[...] = values
            cases = {"zarrfs": zarrfs_dd(store, root / "mnt", values.nbytes),
                     "bare pyfuse3 floor": floor_dd(raw, root / "floor", values.nbytes),
                     "TensorStore (in-process)": tensorstore_read(store, values)}
            rows.append((label, alternated_medians(cases, args.repeat)))
    names = list(rows[0][1])
    print("| codec | " + " | ".join(f"{n} (MB/s)" for n in names)
          + " | zarrfs / floor | zarrfs / TensorStore |")
    print("|---" * (len(names) + 3) + "|")
    for label, medians in rows:
        print(f"| {label} | " + " | ".join(f"{medians[n]:,.0f}" for n in names)
              + f" | {medians['zarrfs'] / medians['bare pyfuse3 floor']:.2f}x"
              + f" | {medians['zarrfs'] / medians['TensorStore (in-process)']:.2f}x |")


if __name__ == "__main__":
    main()
