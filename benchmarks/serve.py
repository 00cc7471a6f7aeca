#!/usr/bin/env python3
"""zarrfs benchmark, `zarrfs serve` against a mount of the same array (issue 88's targets):

1. streaming GET of `data` by curl from a fresh server, against `dd bs=1M` of `data` of a
   fresh mount (cold: the store's files in the page cache, nothing decoded), alternated;
2. 8 clients GETting `data` at once: the bytes each got against the mount's (sha256), and
   their aggregate speed;
3. one tile of `data.tif`: the store requests GDAL's /vsicurl/ reading that tile's window
   costs (its header and the tile), against tifffile's open and one pread of the tile on a
   mount (ZARRFS_REQUEST_LOG);
4. the server's memory (PSS of it and its decoding processes, sampled every 50 ms) during
   the streaming GETs, against the mount's bound: the cache, 100 MiB, and each worker.

A (8192, 8192) uint16 image (128 MiB, `--rows` changes it) in 512 x 512 chunks, zstd level 1,
local. Prints medians and ratios, and the load average at the start and the end.

    .venv/bin/python benchmarks/serve.py [--repeat 5] [--rows 8192]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import tifffile
import zarr
from zarr.codecs import ZstdCodec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zarrfs_bench.common import VENV_BIN, alternated_medians, dd
from zarrfs_bench.mounting import Mount, descendants, pss

COLUMNS = 8192
CHUNKS = (512, 512)
CACHE = 256 << 20  # the default -o cache=
CLIENTS = 8


class Server:
    """`zarrfs serve` of `source` on a free port for the duration of the block; its PSS (and
    its decoding processes') sampled while it runs."""

    def __init__(self, source: Path, env: dict[str, str] | None = None) -> None:
        self.source, self.env = source, env or {}
        self.peak_pss = 0
        self._done = threading.Event()

    def __enter__(self) -> Server:
        self.process = subprocess.Popen([str(VENV_BIN / "zarrfs"), "serve", str(self.source), "--listen",
                                         "127.0.0.1:0", "-o", "ro"], stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env={**os.environ, **self.env})
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode()
        if not line.startswith("serving "):
            self.process.kill()
            raise RuntimeError(f"zarrfs serve did not start: {line!r}")
        self.url = line.split()[1]
        threading.Thread(target=self._watch, daemon=True).start()
        return self

    def _watch(self) -> None:
        while not self._done.wait(0.05):
            self.peak_pss = max(self.peak_pss, pss([self.process.pid, *descendants(self.process.pid)]))

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self.process.terminate()
        self.process.wait(120)


def make_array(path: Path, rows: int) -> np.ndarray:
    values = np.random.default_rng(3).integers(0, 4096, (rows, COLUMNS), dtype="<u2")
    array = zarr.create_array(path, shape=values.shape, chunks=CHUNKS, dtype="<u2",
                              compressors=ZstdCodec(level=1))
    array[...] = values
    return values


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def curl_seconds(url: str, size: int) -> float:
    done = subprocess.run(["curl", "-s", "-S", "-o", "/dev/null", "-w", "%{size_download} %{time_total}",
                           url], capture_output=True, text=True, check=True, timeout=600)
    got, seconds = done.stdout.split()
    if int(got) != size:
        raise RuntimeError(f"curl got {got} bytes of {size}")
    return float(seconds)


def streaming(source: Path, size: int, repeat: int, work: Path) -> tuple[dict[str, float], int]:
    peaks: list[int] = []

    def mount_dd() -> float:
        with Mount(str(VENV_BIN / "zarrfs"), source, work / "mnt", "ro") as mount:
            return size / dd(mount.mp / "data", "/dev/null", expect=size) / 1e6

    def server_get() -> float:
        with Server(source) as server:
            speed = size / curl_seconds(server.url + "data", size) / 1e6
        peaks.append(server.peak_pss)
        return speed

    medians = alternated_medians({"mount: cold dd of data": mount_dd, "serve: cold GET of data": server_get},
                                 repeat)
    return medians, max(peaks)


def eight_clients(source: Path, size: int, work: Path) -> tuple[bool, float]:
    with Mount(str(VENV_BIN / "zarrfs"), source, work / "mnt", "ro") as mount:
        expected = hashlib.sha256((mount.mp / "data").read_bytes()).hexdigest()
    with Server(source) as server:
        def fetch(_: int) -> str:
            done = subprocess.run(["curl", "-s", "-S", server.url + "data"], capture_output=True, check=True,
                                  timeout=600)
            return hashlib.sha256(done.stdout).hexdigest()

        start = time.perf_counter()
        with ThreadPoolExecutor(CLIENTS) as pool:
            digests = list(pool.map(fetch, range(CLIENTS)))
        seconds = time.perf_counter() - start
    return all(d == expected for d in digests), CLIENTS * size / seconds / 1e6


def requests_in(log: Path, action: Callable[[], object]) -> int:
    before = len(log.read_text().splitlines()) if log.exists() else 0
    action()
    return len(log.read_text().splitlines()) - before


def one_tile(source: Path, work: Path) -> tuple[int, int]:
    """Store requests: (a mount's open of data.tif by tifffile and a pread of one tile,
    GDAL's /vsicurl/ reading that tile's window)."""
    mount_log, serve_log = work / "mount-requests.log", work / "serve-requests.log"
    tile = (COLUMNS // CHUNKS[1]) + 1  # (the second row's second tile)
    os.environ["ZARRFS_REQUEST_LOG"] = str(mount_log)
    try:
        with Mount(str(VENV_BIN / "zarrfs"), source, work / "mnt", "ro") as mount:
            def pread_tile() -> None:
                with tifffile.TiffFile(mount.mp / "data.tif") as tiff:
                    page = tiff.pages[0]
                    offset, count = page.dataoffsets[tile], page.databytecounts[tile]
                with open(mount.mp / "data.tif", "rb") as f:
                    os.pread(f.fileno(), count, offset)
            on_mount = requests_in(mount_log, pread_tile)
    finally:
        del os.environ["ZARRFS_REQUEST_LOG"]
    with Server(source, {"ZARRFS_REQUEST_LOG": str(serve_log)}) as server:
        window = ["-srcwin", str(CHUNKS[1]), str(CHUNKS[0]), str(CHUNKS[1]), str(CHUNKS[0])]
        through_http = requests_in(serve_log, lambda: subprocess.run(
            ["gdal_translate", "-q", *window, "-of", "ENVI", f"/vsicurl/{server.url}data.tif",
             str(work / "tile.raw")], check=True, timeout=120))
    return on_mount, through_http


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rows", type=int, default=8192)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="zarrfs-serve-bench-", dir="/tmp") as scratch:
        work = Path(scratch)
        values = make_array(work / "a.zarr", args.rows)
        size = values.nbytes
        medians, peak = streaming(work / "a.zarr", size, args.repeat, work)
        same, aggregate = eight_clients(work / "a.zarr", size, work)
        on_mount, through_http = one_tile(work / "a.zarr", work)
    workers = len(os.sched_getaffinity(0))
    print(f"array: {args.rows} x {COLUMNS} uint16 ({size >> 20} MiB), {CHUNKS[0]} x {CHUNKS[1]} chunks, "
          "zstd 1")
    print("| case | median MB/s |\n| --- | ---: |")
    for name, speed in medians.items():
        print(f"| {name} | {speed:.0f} |")
    ratio = medians["serve: cold GET of data"] / medians["mount: cold dd of data"]
    print(f"streaming GET / mount's cold dd: {ratio:.2f}x (target: at least 0.8x)")
    print(f"{CLIENTS} clients at once: {'the same bytes as the mount' if same else 'BYTES DIFFER'}, "
          f"{aggregate:.0f} MB/s in all")
    print(f"one tile of data.tif: {through_http} store requests through /vsicurl/, {on_mount} by a mount's "
          f"open and pread (target: at most the mount's)")
    print(f"server's peak PSS while streaming: {peak / 2**20:.0f} MiB; the bound: cache {CACHE >> 20} MiB "
          f"+ 100 MiB + {workers} workers")
    print(f"load average: {' '.join(f'{x:.2f}' for x in load_before)} at the start, "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
