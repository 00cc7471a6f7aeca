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
   the streaming GETs, against the mount's bound: the cache, 100 MiB, and each worker;
5. a listing of `chunks/` of an array of 10^6 stored chunks (`--chunks`): PROPFIND Depth 1
   by curl from a fresh server (all properties, as Finder and Windows ask; and the three
   rclone and davfs2 read), against `ls -f` and `ls -l` of a fresh mount, alternated
   (`--listing-repeat` times), with the server's peak PSS while it answers.

A (8192, 8192) uint16 image (128 MiB, `--rows` changes it) in 512 x 512 chunks, zstd level 1,
local. Prints medians and ratios, and the load average at the start and the end.

    .venv/bin/python benchmarks/serve.py [--repeat 5] [--rows 8192] [--chunks 1000000]
        [--listing-repeat 3]
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


# What rclone and davfs2 ask of each member (a PROPFIND of named properties).
NAMED_PROPERTIES = ('<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/>'
                    "<D:getcontentlength/><D:getlastmodified/></D:prop></D:propfind>")


def make_chunks(path: Path, count: int) -> None:
    """A 1-D uint16 array of `count` stored chunks of 4 elements, uncompressed, keyed 0, 1, ...
    (a flat `chunks/`): its chunk files written as zarr-python writes them (checked)."""
    array = zarr.create_array(path, shape=(4 * count,), chunks=(4,), dtype="<u2", fill_value=0,
                              compressors=None, chunk_key_encoding={"name": "v2", "separator": "."})
    values = np.arange(4 * count, dtype="<u2")
    for number in range(count):
        (path / str(number)).write_bytes(values[4 * number : 4 * number + 4].tobytes())
    if not np.array_equal(array[: 4 * 1000], values[: 4 * 1000]):
        raise RuntimeError("the chunks written are not what zarr-python reads")


def listing(source: Path, count: int, repeat: int, work: Path) -> tuple[dict[str, float], int]:
    """Seconds (medians) to list `chunks/` of `source` (`count` chunk files), and the
    server's peak PSS while it answered."""
    peaks: list[int] = []

    def mount_ls(*flags: str) -> Callable[[], float]:
        def run() -> float:
            with Mount(str(VENV_BIN / "zarrfs"), source, work / "mnt", "ro") as mount:
                start = time.perf_counter()
                done = subprocess.run(["ls", *flags, str(mount.mp / "chunks")], capture_output=True,
                                      check=True, timeout=3600)
                seconds = time.perf_counter() - start
            if len(done.stdout.splitlines()) < count:
                raise RuntimeError(f"ls {' '.join(flags)} listed {len(done.stdout.splitlines())} of {count}")
            return seconds
        return run

    def propfind(*body: str) -> Callable[[], float]:
        def run() -> float:
            with Server(source) as server:
                asked = ["-X", "PROPFIND", "-H", "Depth: 1", *body, server.url + "chunks/"]
                said = ["-o", "/dev/null", "-w", "%{http_code} %{time_total}"]
                done = subprocess.run(["curl", "-s", "-S", *said, *asked], capture_output=True, text=True,
                                      check=True, timeout=3600)
            status, seconds = done.stdout.split()
            if status != "207":
                raise RuntimeError(f"PROPFIND answered {status}")
            peaks.append(server.peak_pss)
            return float(seconds)
        return run

    cases = {"mount: ls -f chunks/": mount_ls("-f"), "mount: ls -l chunks/": mount_ls("-l"),
             "serve: PROPFIND, all properties": propfind(),
             "serve: PROPFIND, 3 properties": propfind("--data", NAMED_PROPERTIES)}
    return alternated_medians(cases, repeat), max(peaks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--chunks", type=int, default=1_000_000, help="chunk files listed (0: no listing)")
    parser.add_argument("--listing-repeat", type=int, default=3)
    parser.add_argument("--only-listing", action="store_true", help="the listing case alone")
    args = parser.parse_args()
    load_before = os.getloadavg()
    same = True
    with tempfile.TemporaryDirectory(prefix="zarrfs-serve-bench-", dir="/tmp") as scratch:
        if not args.only_listing:
            same = report_reads(Path(scratch), args.rows, args.repeat)
        if args.chunks:
            report_listing(Path(scratch), args.chunks, args.listing_repeat)
    print(f"load average: {' '.join(f'{x:.2f}' for x in load_before)} at the start, "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")
    return 0 if same else 1


def report_reads(work: Path, rows: int, repeat: int) -> bool:
    """Cases 1-4; whether the 8 clients got the mount's bytes."""
    values = make_array(work / "a.zarr", rows)
    size = values.nbytes
    medians, peak = streaming(work / "a.zarr", size, repeat, work)
    same, aggregate = eight_clients(work / "a.zarr", size, work)
    on_mount, through_http = one_tile(work / "a.zarr", work)
    workers = len(os.sched_getaffinity(0))
    print(f"array: {rows} x {COLUMNS} uint16 ({size >> 20} MiB), {CHUNKS[0]} x {CHUNKS[1]} chunks, zstd 1")
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
    return same


def report_listing(work: Path, count: int, repeat: int) -> None:
    """Case 5."""
    made = time.perf_counter()
    make_chunks(work / "long.zarr", count)
    print(f"listing: {count} stored chunks of 4 uint16 (written in {time.perf_counter() - made:.0f} s)")
    medians, peak = listing(work / "long.zarr", count, repeat, work)
    print("| case | median s |\n| --- | ---: |")
    for name, seconds in medians.items():
        print(f"| {name} | {seconds:.1f} |")
    ratio = medians["serve: PROPFIND, all properties"] / medians["mount: ls -l chunks/"]
    print(f"PROPFIND (all properties) / mount's ls -l: {ratio:.2f}x; the server's peak PSS while answering: "
          f"{peak / 2**20:.0f} MiB")


if __name__ == "__main__":
    sys.exit(main())
