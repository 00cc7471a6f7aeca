#!/usr/bin/env python3
"""zarrfs benchmark, cold sequential reads: `dd bs=1M` of `data` of a fresh mount (its store's
files in the page cache), against the floor, a bare pyfuse3 passthrough of the same bytes from
tmpfs through the page cache with the same kernel window (`zarrfs_bench/fuse_floor.py`: what
any Python FUSE daemon serves here), and TensorStore and zarr-python reading the whole array
in-process.
A (8192, 16384) uint16 image (256 MiB, `--rows` changes it) in 512 x 512 chunks, blosc lz4
with shuffle, zstd level 1 and uncompressed, local.

    .venv/bin/python benchmarks/cold_dd.py [--repeat 3] [--rows 8192] [--cores N]

With --cores N everything runs on the first N cores (as `taskset`: the benchmark, and so the
mount, its decoding processes, `dd`, the floor and the in-process readers), the bound too.

A second zarrfs case mounts with `-o push_pages=no`: every page replied to by the request
loop, as before pages were pushed (zarrfs.fuse.pages). A sixth case, decoding alone, is the
least work a daemon does besides replying: the chunks read, decoded and copied into slabs by
a thread a core, in-process, with nothing else.

Prints a Markdown table of medians (MB/s); the runs alternate, one of each case a round. Beside
each speed, the CPU the processes doing the case spent on it (zarrfs: the daemon, its decoding
processes and `dd`; the floor's server and `dd`; TensorStore's, zarr-python's and decoding
alone's threads, here), with what the kernel did in them (the copies): the processes', not the
machine's, which on a shared machine counts its other users too. The bound: a daemon that
replies as cheaply as the floor and decodes as cheaply as the cheaper of decoding alone and
TensorStore spends the sum of their CPU, which the machine's cores do in no less than that sum
divided by their number.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tensorstore as ts
import zarr
import zstandard
from numcodecs import Blosc
from zarr.codecs import BloscCodec, BytesCodec, ZstdCodec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zarrfs_bench.bound_table import Row, measured_row, print_bound_table
from zarrfs_bench.common import (
    VENV_BIN,
    command,
    dd,
    kernel_window_setting,
    own_cpu,
    process_cpu,
)
from zarrfs_bench.fuse_floor import passed_through
from zarrfs_bench.mounting import Mount, descendants

COLUMNS = 16384
CHUNKS = (512, 512)
WINDOW_KB = 1024  # the kernel window zarrfs gives `data` of these chunks (checked below)
CODECS = {
    "blosc lz4 + shuffle": BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=2),
    "zstd level 1": ZstdCodec(level=1),
    "uncompressed": None,  # (what the path costs by itself: nothing to decode)
}
Decoder = Callable[[bytes], bytes]
# Each thread's decoder of a stored chunk, for decoding alone (what zarrfs decodes with).
DECODERS: dict[str, Callable[[], Decoder]] = {
    "blosc lz4 + shuffle": lambda: Blosc().decode,
    "zstd level 1": lambda: zstandard.ZstdDecompressor().decompress,
    "uncompressed": lambda: bytes,
}


def image(rows: int) -> np.ndarray:
    """A microscope-like image: a smooth field plus noise, 12 bits."""
    rng = np.random.default_rng(7)
    y, x = np.ogrid[:rows, :COLUMNS]
    field = 1500 + 1000 * np.sin(y / 700.0) * np.cos(x / 900.0)
    return (field + rng.normal(0, 40, (rows, COLUMNS))).clip(0, 4095).astype(np.uint16)


# Runs the part measured (it gives its seconds), charging it the CPU of the processes the
# reader (second) gives, this one's and its ended children's (dd's) with them.
Timer = Callable[[Callable[[], float], Callable[[], float]], float]


class Metered:
    """MB/s of runs, and the CPU seconds each took (`cpu`, in the order run)."""

    def __init__(self, run: Callable[[Timer], float]) -> None:
        self._run = run  # given the timer of the part measured, gives MB/s
        self.cpu: list[float] = []

    def __call__(self) -> float:
        return self._run(self._timed)

    def _timed(self, action: Callable[[], float], cpu: Callable[[], float] = lambda: 0.0) -> float:
        before = own_cpu() + cpu()
        seconds = action()
        self.cpu.append(own_cpu() + cpu() - before)
        return seconds


def zarrfs_dd(store: Path, mountpoint: Path, nbytes: int, options: str = "ro") -> Metered:
    def run(timed: Timer) -> float:
        with Mount(str(VENV_BIN / "zarrfs"), store, mountpoint, options) as mount:
            # (the daemon sets it once the mount answers, from a thread: on one core, after a
            # while)
            deadline = time.monotonic() + 10
            while (window := int(kernel_window_setting(mountpoint).read_text())) != WINDOW_KB:
                assert time.monotonic() < deadline, window
                time.sleep(0.01)
            assert mount.pid is not None
            daemon = mount.pid

            def cpu() -> float:  # (the daemon, and its fork server and decoding processes)
                return process_cpu([daemon, *descendants(daemon)])
            return nbytes / timed(lambda: dd(mountpoint / "data", "/dev/null", expect=nbytes), cpu) / 1e6
    return Metered(run)


def floor_dd(raw: Path, mountpoint: Path, nbytes: int) -> Metered:
    def run(timed: Timer) -> float:
        with passed_through(raw, mountpoint, 1 << 20, window_kb=WINDOW_KB) as served:
            servers = [pid for pid in descendants(os.getpid()) if "fuse_floor" in command(pid)]
            return nbytes / timed(lambda: dd(served, "/dev/null", expect=nbytes),
                                  lambda: process_cpu(servers)) / 1e6
    return Metered(run)


def read_whole(read: Callable[[Path], np.ndarray], store: Path, values: np.ndarray) -> Metered:
    """A reader in this process reading the whole array of `store` (`read`), its values
    checked."""
    def run(timed: Timer) -> float:
        found: list[np.ndarray] = []

        def reading() -> float:
            start = time.perf_counter()
            found.append(np.asarray(read(store)))
            return time.perf_counter() - start
        seconds = timed(reading)
        assert np.array_equal(found[0], values)
        return values.nbytes / seconds / 1e6
    return Metered(run)


def tensorstore_array(store: Path) -> np.ndarray:
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(store)}}
    return np.asarray(ts.open(spec).result().read().result())


def zarr_python_array(store: Path) -> np.ndarray:
    return np.asarray(zarr.open_array(store, mode="r")[...])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--cores", type=int, default=0, help="run on the first N cores alone")
    args = parser.parse_args()
    if args.cores:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:args.cores])
    values = image(args.rows)
    rows: list[Row] = []
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
                     "zarrfs, push_pages=no": zarrfs_dd(store, root / "mnt", values.nbytes,
                                                        "ro,push_pages=no"),
                     "bare pyfuse3 floor": floor_dd(raw, root / "floor", values.nbytes),
                     "TensorStore (in-process)": read_whole(tensorstore_array, store, values),
                     "zarr-python (in-process)": read_whole(zarr_python_array, store, values),
                     "decoding alone": decoding_alone(store, values, DECODERS[label])}
            rows.append(measured_row(label, cases, args.repeat))
    print_table(rows, values.nbytes)


def decoding_alone(store: Path, values: np.ndarray, decoder: Callable[[], Decoder]) -> Metered:
    """The least work a daemon must do besides replying: on one thread a core, each chunk's
    file read, decoded and copied into its rows' slab (one a thread, used again row after
    row), no layers, no checks; the slabs' last rows checked against the values."""
    threads = len(os.sched_getaffinity(0))
    rows, columns = (-(-n // c) for n, c in zip(values.shape, CHUNKS, strict=True))

    def fill(first: int, slab: np.ndarray) -> None:
        decode = decoder()
        for row in range(first, rows, threads):
            for column in range(columns):
                chunk = np.frombuffer(decode((store / "c" / str(row) / str(column)).read_bytes()),
                                      values.dtype).reshape(CHUNKS)
                slab[:, column * CHUNKS[1] : (column + 1) * CHUNKS[1]] = chunk

    def run(timed: Timer) -> float:
        slabs = [np.empty((CHUNKS[0], values.shape[1]), values.dtype) for _ in range(threads)]

        def all_rows() -> float:
            workers = [threading.Thread(target=fill, args=(first, slabs[first])) for first in range(threads)]
            start = time.perf_counter()
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            return time.perf_counter() - start
        seconds = timed(all_rows)
        for first, slab in enumerate(slabs):
            last = first + (rows - 1 - first) // threads * threads
            assert np.array_equal(slab, values[last * CHUNKS[0] : (last + 1) * CHUNKS[0]])
        return values.nbytes / seconds / 1e6
    return Metered(run)


def print_table(rows: list[Row], nbytes: int) -> None:
    """MB/s and CPU seconds of each case; the bound that replying as the floor does and
    decoding as the cheaper of decoding alone and TensorStore does set on this machine's cores
    together (their CPU seconds summed, spread over every core); zarrfs's ratios to the floor,
    TensorStore and the bound, and the bound's to the floor (the most of the floor a decoding
    daemon can reach here)."""
    floor, tensorstore = "bare pyfuse3 floor", "TensorStore (in-process)"
    print_bound_table(
        "codec", rows, nbytes, lambda cpu: cpu[floor] + min(cpu["decoding alone"], cpu[tensorstore]),
        {"zarrfs / floor": lambda speeds, bound: speeds["zarrfs"] / speeds[floor],
         "zarrfs / TensorStore": lambda speeds, bound: speeds["zarrfs"] / speeds[tensorstore],
         "zarrfs / bound": lambda speeds, bound: speeds["zarrfs"] / bound,
         "bound / floor": lambda speeds, bound: bound / speeds[floor]})


if __name__ == "__main__":
    main()
