#!/usr/bin/env python3
"""zarrfs benchmark, `dd bs=1M` of `data.tif`: a whole read of a default mount's decoded tiles,
each 1 MiB request ending part-way into a tile (no tile ends on a 64 KiB multiple), from a
fresh mount with the page cache dropped (`/proc/sys/vm/drop_caches`: the store's files are read
from disk), against the floor: a bare pyfuse3 passthrough (`direct_io`, as `data.tif`) of a
copy of the same file (`zarrfs_bench/fuse_floor.py`), its page cache dropped too. A (8192,
8192) float32 image (256 MiB, `--rows` changes it) in 256 x 256 chunks, zstd level 1, local.

    .venv/bin/python benchmarks/tif_dd.py [--repeat 4] [--rows 8192] [--trees /work/main,.]

`--trees`: checkouts of zarrfs to mount with, each a case of its own (its path first on the
daemon's PYTHONPATH): before and after a change, in the same rounds. The pixels are checked
once per case (tifffile's reading of the file against the copy's, outside the timing). Needs
root (drop_caches).

Prints a Markdown table of medians (seconds, MB/s, and the CPU seconds the server's processes
spent in the `dd`: the daemon and its decoding processes, or the bare server); the runs
alternate, one of each case a round.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import tifffile
import zarr
from zarr.codecs import ZstdCodec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zarrfs_bench.common import VENV_BIN, alternated_medians, command, dd, log, process_cpu
from zarrfs_bench.fuse_floor import passed_through
from zarrfs_bench.mounting import Mount, descendants

COLUMNS, CHUNKS = 8192, (256, 256)
FLOOR = "bare FUSE, decoded copy"


def build(path: Path, rows: int) -> None:
    """A smooth field plus noise, float32, zstd level 1."""
    y, x = np.ogrid[:rows, :COLUMNS]
    field = np.sin(y / 700.0) * np.cos(x / 900.0) + np.random.default_rng(7).normal(0, 0.05, (rows, COLUMNS))
    zarr.create_array(path, shape=(rows, COLUMNS), chunks=CHUNKS, dtype="float32",
                      compressors=ZstdCodec(level=1))[...] = field.astype(np.float32)


def drop_page_cache() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3")


@contextlib.contextmanager
def daemon_path(tree: str | None) -> Iterator[None]:
    """The daemons started inside import zarrfs from `tree` (None: as installed)."""
    before = os.environ.get("PYTHONPATH")
    if tree is not None:
        os.environ["PYTHONPATH"] = str(Path(tree).resolve())
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


def pixels_hash(tif: Path) -> str:
    return hashlib.sha256(np.ascontiguousarray(tifffile.imread(tif), "<f4").tobytes()).hexdigest()


def timed_dd(name: str, path: Path, server: list[int], cpu: dict[str, list[float]]) -> float:
    """Seconds of a `dd` of `path` after the page cache is dropped; the CPU seconds of the
    `server` processes during it noted in `cpu`."""
    drop_page_cache()
    before = process_cpu(server)
    seconds = dd(path, "/dev/null", expect=path.stat().st_size)
    cpu.setdefault(name, []).append(process_cpu(server) - before)
    log(f"{name}: {seconds:.3f} s, server CPU {cpu[name][-1]:.2f} s, load {os.getloadavg()[0]:.1f}")
    return seconds


def zarrfs_dd(store: Path, mountpoint: Path, tree: str | None, want: str,
              cpu: dict[str, list[float]]) -> Callable[[], float]:
    checked: list[bool] = []

    def run() -> float:
        with daemon_path(tree), Mount(str(VENV_BIN / "zarrfs"), store, mountpoint, "ro") as mount:
            assert mount.pid is not None
            tif = mount.mp / "data.tif"
            seconds = timed_dd(name(tree), tif, [mount.pid, *descendants(mount.pid)], cpu)
            if not checked:  # (once, after the timing)
                assert pixels_hash(tif) == want, f"{tree}: other pixels than the array's"
                checked.append(True)
        return seconds
    return run


def floor_dd(copy: Path, mountpoint: Path, blksize: int, cpu: dict[str, list[float]]) -> Callable[[], float]:
    def run() -> float:
        with passed_through(copy, mountpoint, blksize) as served:
            servers = [pid for pid in descendants(os.getpid()) if "fuse_floor" in command(pid)]
            return timed_dd(FLOOR, served, servers, cpu)
    return run


def name(tree: str | None) -> str:
    return f"zarrfs ({tree or 'installed'})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--trees", default="",
                        help="checkouts of zarrfs, comma-separated (default: as installed)")
    args = parser.parse_args()
    trees: list[str | None] = [*args.trees.split(",")] if args.trees else [None]
    work = Path(tempfile.mkdtemp(prefix="zarrfs-tif-dd-", dir="/var/tmp"))
    try:
        store = work / "image.zarr"
        build(store, args.rows)
        with daemon_path(trees[-1]), Mount(str(VENV_BIN / "zarrfs"), store, work / "mnt", "ro") as mount:
            shutil.copyfile(mount.mp / "data.tif", work / "copy.tif")
            blksize = os.stat(mount.mp / "data.tif").st_blksize
        want, size = pixels_hash(work / "copy.tif"), (work / "copy.tif").stat().st_size
        cpu: dict[str, list[float]] = {}
        cases = {name(tree): zarrfs_dd(store, work / "mnt", tree, want, cpu) for tree in trees}
        cases[FLOOR] = floor_dd(work / "copy.tif", work / "floor", blksize, cpu)
        medians = alternated_medians(cases, args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(report(medians, {case: statistics.median(found) for case, found in cpu.items()}, args, size))


def report(medians: dict[str, float], cpu: dict[str, float], args: argparse.Namespace, size: int) -> str:
    lines = [f"# `dd bs=1M` of data.tif, fresh mounts, page cache dropped: ({args.rows}, {COLUMNS}) float32 "
             f"in {CHUNKS[0]} x {CHUNKS[1]} zstd-1 chunks, medians of {args.repeat} alternated rounds, "
             f"load average {os.getloadavg()[0]:.1f}", "",
             "| case | seconds | MB/s | of the floor | server CPU s |", "|---|---|---|---|---|"]
    floor = medians[FLOOR]
    lines += [f"| {case} | {seconds:.3f} | {size / seconds / 1e6:.0f} | {floor / seconds:.2f}x "
              f"| {cpu[case]:.2f} |" for case, seconds in medians.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
