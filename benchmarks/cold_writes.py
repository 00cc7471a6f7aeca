#!/usr/bin/env python3
"""zarrfs benchmark, whole-array writes: `dd bs=1M conv=notrunc,fsync` of raw values (on tmpfs)
into `data` of a fresh empty array on a fresh mount, against TensorStore's file driver writing
the same values into a fresh empty array in-process, the sink, a bare pyfuse3 server storing
the same writes into a file on tmpfs (`zarrfs_bench/fuse_floor.py`: what any Python FUSE
daemon pays to take them), and encoding alone.
A (8192, 16384) uint16 image (256 MiB, `--rows` changes it) in 512 x 512 chunks, zstd level 1
(`--level`; 0: no compression at all, where encoding is a copy), plain and in 4096 x 4096 shards, local.

    .venv/bin/python benchmarks/cold_writes.py [--repeat 3] [--rows 8192] [--cores N] [--level 1]
                                               [--layouts plain,sharded] [--detail]

Encoding alone is the least work a daemon does besides taking the writes: on a thread a core,
each chunk copied out of the values, encoded (python-zstandard, as zarrfs encodes) and stored
as the store stores it (a file written and fsynced; a shard's inner chunks joined with their
index), no layers, no checks. What every writer wrote (zarrfs, TensorStore, encoding alone)
is read back by TensorStore and checked against the values, after the part timed.

Prints a Markdown table of medians (MB/s); the runs alternate, one of each case a round. Beside
each speed, the CPU its processes spent on the run (zarrfs: the daemon, its decoding processes
and `dd`; the sink and `dd`; TensorStore's and encoding alone's threads, here): the processes',
not the machine's, which on a shared machine counts its other users too; the kernel's threads
writing files back are charged to none of them. The bound: a daemon that takes writes as
cheaply as the sink and encodes and stores them as cheaply as encoding alone spends the sum of
their CPU, which the machine's cores do in no less than that sum divided by their number.
`--detail` prints, for each zarrfs run, the CPU of the daemon, of its decoding processes and of
`dd`, and how many chunks the processes encoded (`zarrfs stats`: zarrfs.array.writes.policy
decides, by how fast the array's chunks encode).
A second table says where zarrfs's time went (zarrfs_bench/thread_cpu.py): the CPU of the
daemon's request path and of its encoders (its write-back, early and loader threads, and its
processes), each process's, and the share of the wall time the two were busy at once.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import google_crc32c
import numpy as np
import tensorstore as ts
import zarr
import zstandard
from zarr.codecs import ZstdCodec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cold_dd import image
from zarrfs_bench.bound_table import Row, measured_row, print_bound_table
from zarrfs_bench.common import VENV_BIN, command, dd, own_cpu, process_cpu
from zarrfs_bench.fuse_floor import passed_through
from zarrfs_bench.mounting import Mount, descendants
from zarrfs_bench.thread_cpu import Shares, ThreadSampler

CHUNKS = (512, 512)
SHARDS = (4096, 4096)
NO_CHUNK = 2**64 - 1  # (an index's offset and size of an inner chunk not stored)
SINK = "bare pyfuse3 sink"
ALONE = "encoding alone"
TENSORSTORE = "TensorStore (in-process)"


class Measured:
    """MB/s of runs, and the CPU seconds each took (`cpu`, in the order run)."""

    def __init__(self, run: Callable[[], tuple[float, float]]) -> None:
        self._run = run  # gives MB/s and CPU seconds
        self.cpu: list[float] = []
        self.shares: list[Shares] = []  # (zarrfs's runs: where their time went)

    def __call__(self) -> float:
        speed, cpu = self._run()
        self.cpu.append(cpu)
        return speed


@dataclass(frozen=True)
class Layout:
    """The array every writer writes: its values, in shards or not, zstd at `level` (0: none)."""

    values: np.ndarray
    sharded: bool
    level: int

    @property
    def name(self) -> str:
        return "sharded" if self.sharded else "plain"

    @property
    def codec(self) -> str:
        return f"zstd level {self.level}" if self.level else "no compression"

    def encoder(self) -> Callable[[np.ndarray], bytes]:
        """What encodes a chunk as the array stores it (python-zstandard, as zarrfs encodes)."""
        if not self.level:
            return lambda box: np.ascontiguousarray(box).tobytes()
        compressor = zstandard.ZstdCompressor(level=self.level, write_content_size=True)
        return lambda box: compressor.compress(np.ascontiguousarray(box))

    def empty(self, store: Path) -> None:
        """A fresh array with no chunk stored (zarr-python's metadata), on disk."""
        shutil.rmtree(store, ignore_errors=True)
        zarr.create_array(store, shape=self.values.shape, dtype="uint16", chunks=CHUNKS,
                          shards=SHARDS if self.sharded else None,
                          compressors=ZstdCodec(level=self.level) if self.level else None,
                          fill_value=0)
        os.sync()  # (what was written before is not written back during a run)

    def check(self, store: Path, writer: str) -> None:
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(store)}}
        found = np.asarray(ts.open(spec).result().read().result())
        if not np.array_equal(found, self.values):
            wrong = int((found != self.values).sum())
            raise RuntimeError(f"after {writer}'s write, TensorStore reads {wrong} other elements")


def zarrfs_write(root: Path, raw: Path, layout: Layout, detail: bool) -> Measured:
    store, mountpoint, nbytes = root / "zarrfs.zarr", root / "mnt", layout.values.nbytes

    def run() -> tuple[float, float]:
        layout.empty(store)
        with Mount(str(VENV_BIN / "zarrfs"), store, mountpoint, "rw") as mount:
            assert mount.pid is not None
            daemon, dd_before = mount.pid, resource.getrusage(resource.RUSAGE_CHILDREN)
            processes = descendants(daemon)
            before = process_cpu([daemon]), process_cpu(processes)
            with ThreadSampler(daemon, processes) as sampler:
                start = time.perf_counter()
                dd(raw, mountpoint / "data", "conv=notrunc,fsync", expect=nbytes)
                seconds = time.perf_counter() - start
            measured.shares.append(sampler.shares)
            dd_after = resource.getrusage(resource.RUSAGE_CHILDREN)
            spent = (process_cpu([daemon]) - before[0], process_cpu(descendants(daemon)) - before[1],
                     dd_after.ru_utime + dd_after.ru_stime - dd_before.ru_utime - dd_before.ru_stime)
            if detail:
                report(layout, nbytes / seconds / 1e6, spent, mount_stats(mountpoint))
        layout.check(store, "zarrfs")
        return nbytes / seconds / 1e6, sum(spent)
    measured = Measured(run)
    return measured


def report(layout: Layout, speed: float, spent: tuple[float, float, float], stats: dict[str, float]) -> None:
    print(f"  zarrfs {layout.name}: {speed:,.0f} MB/s; CPU s: daemon {spent[0]:.2f}, its processes"
          f" {spent[1]:.2f}, dd {spent[2]:.2f}; chunks encoded in processes"
          f" {stats['chunks_encoded_in_processes']:.0f} of {stats['chunks_encoded']:.0f}",
          file=sys.stderr, flush=True)


def mount_stats(mountpoint: Path) -> dict[str, float]:
    found = subprocess.run([str(VENV_BIN / "zarrfs"), "stats", "--json", str(mountpoint)], check=True,
                           capture_output=True, text=True).stdout
    return dict(json.loads(found))


def in_process(store: Path, layout: Layout, writer: str, write: Callable[[], None]) -> Measured:
    """A writer in this process (`write`, on threads of its own), timed, then checked."""
    def run() -> tuple[float, float]:
        layout.empty(store)
        cpu, start = own_cpu(), time.perf_counter()
        write()
        seconds, cpu = time.perf_counter() - start, own_cpu() - cpu
        layout.check(store, writer)
        return layout.values.nbytes / seconds / 1e6, cpu
    return Measured(run)


def tensorstore_write(root: Path, layout: Layout) -> Measured:
    store = root / "tensorstore.zarr"

    def write() -> None:
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(store)}}
        ts.open(spec, open=True, write=True).result().write(layout.values).result()
    return in_process(store, layout, "TensorStore", write)


def sink_write(raw: Path, target: Path, mountpoint: Path, nbytes: int) -> Measured:
    def run() -> tuple[float, float]:
        with open(target, "wb") as made:
            made.truncate(nbytes)
        with passed_through(target, mountpoint, 1 << 20, sink=True) as served:
            (server,) = [pid for pid in descendants(os.getpid()) if "fuse_floor" in command(pid)]
            cpu, start = own_cpu() + process_cpu([server]), time.perf_counter()
            dd(raw, served, "conv=notrunc,fsync", expect=nbytes)
            seconds, cpu = time.perf_counter() - start, own_cpu() + process_cpu([server]) - cpu
        if not filecmp(raw, target):
            raise RuntimeError("the sink stored other bytes")
        return nbytes / seconds / 1e6, cpu
    return Measured(run)


def filecmp(a: Path, b: Path) -> bool:
    with open(a, "rb") as first, open(b, "rb") as second:
        while block := first.read(16 << 20):
            if block != second.read(len(block)):
                return False
        return not second.read(1)


def encoding_alone(root: Path, layout: Layout) -> Measured:
    """Every chunk (shard) encoded and stored by a thread a core, in-process."""
    store, values = root / "alone.zarr", layout.values
    unit = SHARDS if layout.sharded else CHUNKS
    grid = [(row, column) for row in range(-(-values.shape[0] // unit[0]))
            for column in range(-(-values.shape[1] // unit[1]))]

    def store_units(first: int, threads: int) -> None:
        encode = layout.encoder()
        for row, column in grid[first::threads]:
            box = values[row * unit[0] : (row + 1) * unit[0], column * unit[1] : (column + 1) * unit[1]]
            data = shard(encode, box) if layout.sharded else [encode(box)]
            folder = store / "c" / str(row)
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(folder / str(column), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.writev(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)

    def write() -> None:
        threads = len(os.sched_getaffinity(0))
        workers = [threading.Thread(target=store_units, args=(first, threads)) for first in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    return in_process(store, layout, ALONE, write)


def shard(encode: Callable[[np.ndarray], bytes], box: np.ndarray) -> list[bytes]:
    """A shard's parts: its inner chunks encoded, then its index (offsets and sizes, crc32c)."""
    parts: list[bytes] = []
    index: list[int] = []
    at = 0
    for row in range(0, SHARDS[0], CHUNKS[0]):
        for column in range(0, SHARDS[1], CHUNKS[1]):
            if row >= box.shape[0] or column >= box.shape[1]:  # (past the array's edge)
                index += [NO_CHUNK, NO_CHUNK]
                continue
            inner = box[row : row + CHUNKS[0], column : column + CHUNKS[1]]
            encoded = encode(inner)
            parts.append(encoded)
            index += [at, len(encoded)]
            at += len(encoded)
    packed = struct.pack(f"<{len(index)}Q", *index)
    return [*parts, packed + struct.pack("<I", google_crc32c.value(packed))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--cores", type=int, default=0, help="run on the first N cores alone")
    parser.add_argument("--layouts", default="plain,sharded")
    parser.add_argument("--level", type=int, default=1, help="zstd's level (0: no compression)")
    parser.add_argument("--detail", action="store_true", help="each zarrfs run's CPU, by process")
    args = parser.parse_args()
    if args.cores:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:args.cores])
    values = image(args.rows)
    rows: list[Row] = []
    sampled: list[tuple[str, Measured]] = []
    with tempfile.TemporaryDirectory(prefix="zarrfs-cold-writes-") as tmp, \
            tempfile.TemporaryDirectory(prefix="zarrfs-sink-", dir="/dev/shm") as shm:
        root = Path(tmp)
        raw = Path(shm) / "values"
        raw.write_bytes(values.tobytes())
        for name in args.layouts.split(","):
            layout = Layout(values, name == "sharded", args.level)
            cases = {"zarrfs": zarrfs_write(root, raw, layout, args.detail),
                     TENSORSTORE: tensorstore_write(root, layout),
                     SINK: sink_write(raw, Path(shm) / "sunk", root / "sink", values.nbytes),
                     ALONE: encoding_alone(root, layout)}
            rows.append(measured_row(f"{layout.codec}, {name}", cases, args.repeat))
            sampled.append((rows[-1][0], cases["zarrfs"]))
    print_table(rows, values.nbytes)
    print_where_time_goes(sampled)


def print_table(rows: list[Row], nbytes: int) -> None:
    """MB/s and CPU seconds of each case; the bound that taking writes as the sink does and
    encoding alone set on this machine's cores together (their CPU seconds summed, spread over
    every core); zarrfs's ratios to TensorStore and the bound, and the bound's to TensorStore."""
    print_bound_table(
        "array", rows, nbytes, lambda cpu: cpu[SINK] + cpu[ALONE],
        {"zarrfs / TensorStore": lambda speeds, bound: speeds["zarrfs"] / speeds[TENSORSTORE],
         "zarrfs / bound": lambda speeds, bound: speeds["zarrfs"] / bound,
         "bound / TensorStore": lambda speeds, bound: bound / speeds[TENSORSTORE]})


def print_where_time_goes(sampled: list[tuple[str, Measured]]) -> None:
    """Medians over zarrfs's runs of each layout (zarrfs_bench.thread_cpu): the CPU seconds of
    the daemon's request path and of the encoders (the daemon's threads and its processes),
    each of its processes' (largest first), and the shares of the wall time that the request
    path and the encoders were busy at once, or one without the other."""
    print("\n| array (zarrfs) | request path CPU s | encoders CPU s | each process's CPU s"
          " | overlap | requests alone | encoders alone |")
    print("|---" * 7 + "|")
    for label, measured in sampled:
        runs = measured.shares
        most = max(len(run.processes) for run in runs)
        each = [sorted(run.processes.values(), reverse=True) + [0.0] * (most - len(run.processes))
                for run in runs]
        processes = ", ".join(f"{statistics.median(column):.2f}" for column in zip(*each, strict=True))
        seconds = [f"{_median(runs, name):.2f}" for name in ("requests", "encoders")]
        shares = [f"{_median(runs, name):.0%}" for name in ("overlap", "requests_alone", "encoders_alone")]
        print(f"| {label} | {' | '.join(seconds)} | {processes} | {' | '.join(shares)} |")


def _median(runs: list[Shares], figure: str) -> float:
    return float(statistics.median(getattr(run, figure) for run in runs))


if __name__ == "__main__":
    main()
