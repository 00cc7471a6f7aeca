#!/usr/bin/env python3
"""zarrfs benchmark, Icechunk writes: `--files` chunk-sized files (one chunk of a float32
array each), each written, fsynced and closed through a `zarrfs -o rw` mount of a local
Icechunk repository (a commit per fsync), against zarr-python writing the same chunks through
Icechunk's own session with a commit per chunk; in the same run, medians of `--repeat`, each
side on a fresh repository.

    .venv/bin/python benchmarks/icechunk_writes.py [--files 64] [--chunk 256] [--repeat 3]
        [--out icechunk_writes.md]

See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import icechunk
import numpy as np
import zarr

ZARRFS = shutil.which("zarrfs", path=os.path.dirname(sys.executable)) or "zarrfs"


def new_repository(path: Path, files: int, chunk: int) -> icechunk.Repository:
    """A repository whose `main` holds an empty (files * chunk, chunk) float32 array (zstd)."""
    repository = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))
    session = repository.writable_session("main")
    zarr.create_array(session.store, name="a", shape=(files * chunk, chunk), chunks=(chunk, chunk),
                      dtype="float32", fill_value=0)
    session.commit("empty")
    return repository


def blocks(files: int, chunk: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [np.round(rng.random((chunk, chunk), dtype="float32"), 2) for _ in range(files)]


def through_zarrfs(path: Path, data: list[np.ndarray]) -> float:
    """Seconds to write each block as a chunk file with fsync, on a mount made beforehand."""
    mountpoint = path.with_name(path.name + "-mnt")
    mountpoint.mkdir()
    subprocess.run([ZARRFS, "mount", f"icechunk://{path}", str(mountpoint), "-o", "rw"], check=True)
    try:
        start = time.perf_counter()
        for index, block in enumerate(data):
            fd = os.open(mountpoint / "a" / "chunks" / "c" / str(index) / "0", os.O_WRONLY)
            try:
                os.write(fd, block.tobytes())
                os.fsync(fd)
            finally:
                os.close(fd)
        return time.perf_counter() - start
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True)


def through_icechunk(repository: icechunk.Repository, data: list[np.ndarray]) -> float:
    """Seconds to write each block with zarr-python through a session, a commit each."""
    chunk = data[0].shape[0]
    start = time.perf_counter()
    for index, block in enumerate(data):
        session = repository.writable_session("main")
        zarr.open_array(session.store, path="a", mode="r+")[index * chunk : (index + 1) * chunk] = block
        session.commit(f"chunk {index}")
    return time.perf_counter() - start


def check(repository: icechunk.Repository, data: list[np.ndarray], commits: int) -> None:
    """What both sides wrote is read back by Icechunk, one commit per file."""
    stored = zarr.open_array(repository.readonly_session(branch="main").store, path="a", mode="r")[...]
    if not np.array_equal(stored, np.concatenate(data)):
        raise SystemExit("the repository does not hold what was written")
    made = len(list(repository.ancestry(branch="main"))) - 2  # (the creation and "empty")
    if made != commits:
        raise SystemExit(f"{made} commits for {commits} files")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--chunk", type=int, default=256, help="chunk side (float32): 256 = 256 KiB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    data = blocks(args.files, args.chunk)
    seconds: dict[str, list[float]] = {"zarrfs": [], "icechunk": []}
    with tempfile.TemporaryDirectory(prefix="zarrfs-icechunk-writes-") as work:
        for repeat in range(args.repeat):
            for side in seconds:
                path = Path(work) / f"{side}-{repeat}"
                repository = new_repository(path, args.files, args.chunk)
                if side == "zarrfs":
                    seconds[side].append(through_zarrfs(path, data))
                else:
                    seconds[side].append(through_icechunk(repository, data))
                check(repository, data, args.files)
    report = render(args, seconds)
    print(report)
    if args.out:
        args.out.write_text(report)


def render(args: argparse.Namespace, seconds: dict[str, list[float]]) -> str:
    median = {side: statistics.median(values) for side, values in seconds.items()}
    megabytes = args.files * args.chunk * args.chunk * 4 / 1e6
    rows = [f"| {side} | {median[side]:.2f} s | {args.files / median[side]:.1f} | "
            f"{megabytes / median[side]:.1f} | {', '.join(f'{v:.2f}' for v in seconds[side])} |"
            for side in seconds]
    return "\n".join([
        f"# Icechunk writes: {args.files} files of {args.chunk}x{args.chunk} float32 (zstd), "
        f"a commit each, median of {args.repeat}",
        "",
        "| writer | time | commits/s | MB/s | runs |",
        "|---|---|---|---|---|",
        *rows,
        "",
        f"zarrfs / zarr-python+icechunk throughput: {median['icechunk'] / median['zarrfs']:.2f}x",
    ])


if __name__ == "__main__":
    main()
