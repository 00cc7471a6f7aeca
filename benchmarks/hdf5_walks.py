#!/usr/bin/env python3
"""zarrfs benchmark, walks of data.h5's whole chunk index (issue 76): tools that show a
dataset's storage size (`h5ls -v`, h5py's `get_storage_size`) make HDF5 read every node of the
index. Measured on fresh mounts of twins (uint8, 16 x 16 chunks): a 16-chunk twin, a sparse
array of 10^6 chunks with 3 stored (its chunks passed through as zlib; zstd decoded, the
default; zstd passed through with `-o filters=plugins`), and with --dense N an N x N array
with every chunk stored (local only); locally and (--s3) on a moto S3 server behind a proxy
adding 10 ms each way. Beside them, what the peers take for the same question: zarr-python's
`nchunks_initialized` (a listing of the array's keys) of the same array, and `h5ls -v` of an
HDF5 file h5py wrote with the same chunks (its index holds only the chunks written).

    .venv/bin/python benchmarks/hdf5_walks.py [--repeat 3] [--s3] [--dense 1000]

Prints a Markdown table: medians of seconds and of the store requests each walk made (the
daemon's request log), and the ratio to the twin's walk.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zarrfs_bench.common import VENV_BIN
from zarrfs_bench.mounting import Mount
from zarrfs_bench.places import Where, on_s3
from zarrfs_bench.s3 import environ
from zarrfs_bench.scale import scale_arrays

CHUNK = (16, 16)
SPARSE = [(0, 0), (500, 700), (999, 999)]
ENV = {k: v for k, v in os.environ.items() if k != "HDF5_PLUGIN_PATH"}


def h5ls(path: Path) -> None:
    subprocess.run(["h5ls", "-v", str(path)], check=True, capture_output=True, env=ENV)


def h5py_size(path: Path) -> None:
    with h5py.File(path, "r") as f:
        f["data"].id.get_storage_size()


WALKERS: dict[str, Callable[[Path], None]] = {"h5ls -v": h5ls, "h5py get_storage_size": h5py_size}


def walk(where: Where, options: tuple[str, ...], walker: Callable[[Path], None],
         work: Path) -> tuple[float, int]:
    """(seconds, store requests) of one walk on a fresh mount (its stat before the clock)."""
    log = scale_arrays().RequestLog(work / f"requests-{time.monotonic_ns()}.log")
    with environ(log.env), Mount(str(VENV_BIN / "zarrfs"), where.url, work / "mnt",
                                 where.mount_options(*options), logfile=work / "daemon.log") as mount:
        path = mount.mp / "data.h5"
        os.stat(path)
        log.take(quiet=0.2)
        started = time.perf_counter()
        walker(path)
        seconds = time.perf_counter() - started
        return seconds, len(log.take(quiet=0.5))


def zarr_census(where: Where) -> float:
    started = time.perf_counter()
    stored = zarr.open_array(where.url, mode="r", storage_options=where.storage_options()).nchunks_initialized
    assert stored > 0
    return time.perf_counter() - started


def native_file(path: Path, grid: tuple[int, int], stored: list[tuple[int, int]]) -> Path:
    """An HDF5 file h5py writes of the same array (gzip chunks of 16 x 16, only `stored`)."""
    with h5py.File(path, "w", libver="earliest") as f:
        dataset = f.create_dataset("data", shape=(grid[0] * 16, grid[1] * 16), dtype="uint8", chunks=CHUNK,
                                   compression="gzip", compression_opts=1)
        for i, j in stored:
            dataset[i * 16:(i + 1) * 16, j * 16:(j + 1) * 16] = np.full(CHUNK, (i + j) % 251 + 1, "uint8")
    return path


def cases(scratch: Path, dense: int) -> list[tuple[str, Path, tuple[str, ...]]]:
    twins = scale_arrays()
    zlib = twins.ZLIB
    twin = twins.write_twin(scratch / "twin.zarr", (4, 4), CHUNK, compression=zlib)
    made = [("16-chunk twin, zlib", twin, ()),
            ("10^6 chunks, 3 stored, zlib as stored", twins.write_twin(
                scratch / "sparse-zlib.zarr", (1000, 1000), CHUNK, stored=SPARSE, compression=zlib), ())]
    zstd = twins.write_twin(scratch / "sparse-zstd.zarr", (1000, 1000), CHUNK, stored=SPARSE)
    made += [("10^6 chunks, 3 stored, zstd decoded", zstd, ()),
             ("10^6 chunks, 3 stored, zstd as stored", zstd, ("filters=plugins",))]
    if dense:
        made.append((f"{dense}^2 chunks, all stored, zlib as stored",
                     twins.write_twin(scratch / "dense.zarr", (dense, dense), CHUNK, compression=zlib), ()))
    return made


def table(place: str, wheres: dict[str, Where], made: list[tuple[str, Path, tuple[str, ...]]], repeat: int,
          work: Path) -> None:
    twin_times: dict[str, float] = {}
    for label, store, options in made:
        where = wheres.get(store.name)
        if where is None:
            continue
        for name, walker in WALKERS.items():
            runs = [walk(where, options, walker, work) for _ in range(repeat)]
            seconds, requests = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
            twin_times.setdefault(name, seconds)
            print(f"| {label} | {place} | {name} | {seconds:.3f} | {requests:.0f} "
                  f"| {seconds / twin_times[name]:.1f} |", flush=True)
        census = statistics.median(zarr_census(where) for _ in range(repeat))
        print(f"| {label} | {place} | zarr-python nchunks_initialized | {census:.3f} | | |", flush=True)


def main() -> None:
    warnings.filterwarnings("ignore", category=UserWarning)  # (numcodecs' codecs in v3, zarr-python says)
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--s3", action="store_true", help="also on S3 behind a 20 ms proxy")
    parser.add_argument("--dense", type=int, default=0, help="also an N x N array of every chunk stored")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}\n")
    print("| array | where | walker | seconds | requests | / twin |\n|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        made = cases(scratch, args.dense)
        local = {store.name: Where(str(store)) for _, store, _ in made}
        table("local", local, made, args.repeat, scratch)
        native = native_file(scratch / "native.h5", (1000, 1000), SPARSE)
        seconds = statistics.median(timed(lambda: h5ls(native)) for _ in range(args.repeat))
        print(f"| h5py's own file, 10^6 chunks, 3 written | local | h5ls -v | {seconds:.3f} | | |")
        if args.s3:
            remote = [store for _, store, _ in made if not store.name.startswith("dense")]
            with contextlib.ExitStack() as stack:
                wheres = stack.enter_context(on_s3(sorted(set(remote)), scratch / "s3.log"))
                on = {where.url.rsplit("/", 1)[-1]: where for where in wheres}
                table("S3 + 20 ms", on, made, args.repeat, scratch)


def timed(action: Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
